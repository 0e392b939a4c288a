/* SPDX-License-Identifier: MIT */
/* sbx's man page (sbx help --man) and bash completion (sbx completion bash), written from
 * the command table of sbx.c, which the help is printed from too: a command or an option is
 * written down once, and the three cannot disagree. The Makefile builds build/sbx.1 and
 * build/sbx.bash-completion with them. */
#include "cli/cli_impl.h"

#include <stdio.h>
#include <string.h>

#include "wire/version.h"

/* Writes text as roff running text: its backslashes and minus signs escaped, a line that
 * would start with a control character ('.' or '\'') guarded, and, unless keep_lines, its
 * newlines joined with spaces (a help text's continued lines). */
static void sbx_doc_roff(FILE *f, const char *text, bool keep_lines)
{
    bool bol = true;
    for (const char *p = text; *p; p++) {
        if (bol && (*p == '.' || *p == '\'')) {
            (void)fputs("\\&", f);
        }
        bol = false;
        if (*p == '\\') {
            (void)fputs("\\e", f);
        } else if (*p == '-') {
            (void)fputs("\\-", f);
        } else if (*p == '\n') {
            (void)fputc(keep_lines ? '\n' : ' ', f);
            bol = keep_lines;
        } else {
            (void)fputc(*p, f);
        }
    }
}

static void sbx_doc_man_opts(FILE *f, const struct sbx_opt *opts)
{
    for (const struct sbx_opt *o = opts; o && o->flag; o++) {
        (void)fputs(".TP\n\\fB", f);
        sbx_doc_roff(f, o->flag, false);
        (void)fputs("\\fR", f);
        if (o->arg) {
            (void)fputs(" \\fI", f);
            sbx_doc_roff(f, o->arg, false);
            (void)fputs("\\fR", f);
        }
        (void)fputc('\n', f);
        sbx_doc_roff(f, o->help, false);
        (void)fputc('\n', f);
    }
}

void sbx_doc_man(FILE *f)
{
    (void)fputs(".TH SBX 1 \"\" \"sbx " SBX_VERSION "\" \"User Commands\"\n"
                ".SH NAME\n"
                "sbx \\- run commands in fresh sandboxes of sbxd, or in sessions\n"
                ".SH SYNOPSIS\n"
                ".B sbx\n"
                "[\\fB\\-\\-socket\\fR \\fIPATH\\fR] [\\fB\\-\\-admin\\-socket\\fR \\fIPATH\\fR]\n"
                "\\fICOMMAND\\fR [\\fIARGS\\fR]\n"
                ".br\n"
                ".B sbx \\-\\-version\n"
                ".br\n"
                ".B sbx help\n"
                "[\\fICOMMAND\\fR]\n"
                ".SH DESCRIPTION\n"
                ".B sbx\n"
                "is the command-line client of sbxd, which runs each task in a fresh sandbox "
                "taken from a warm pool.\n"
                "It talks msgpack-rpc to sbxd over the agents' socket, or the admin socket for "
                "the admin commands.\n"
                "Every command prints its help with \\fB\\-\\-help\\fR.\n"
                ".SH COMMANDS\n",
                f);
    for (size_t i = 0; i < sbx_n_cmds; i++) {
        const struct sbx_cmd *c = &sbx_cmds[i];
        (void)fputs(".SS \"sbx ", f);
        sbx_doc_roff(f, c->name, false);
        if (c->synopsis[0]) {
            (void)fputc(' ', f);
            sbx_doc_roff(f, c->synopsis, false);
        }
        (void)fputs("\"\n", f);
        sbx_doc_roff(f, c->summary, false);
        (void)fputs(".\n", f);
        if (c->opts) {
            (void)fputs(".PP\n", f);
            sbx_doc_roff(f, c->opts_title ? c->opts_title : "Options:", false);
            (void)fputc('\n', f);
            sbx_doc_man_opts(f, c->opts);
        }
        if (c->notes) {
            (void)fputs(".PP\n", f);
            sbx_doc_roff(f, c->notes, false);
            (void)fputc('\n', f);
        }
    }
    (void)fputs(".SH GLOBAL OPTIONS\n", f);
    sbx_doc_man_opts(f, sbx_global_opts);
    (void)fputs(".SH EXIT STATUS\n"
                "\\fBsbx exec\\fR exits as docker run, podman and GNU timeout do:\n"
                ".TP\n.B 0..255\nthe command's own exit status (which may be one of those below "
                "too: with \\fB\\-\\-json\\fR, \\fIstatus\\fR tells them apart)\n"
                ".TP\n.B 124\nthe task timed out\n"
                ".TP\n.B 125\nsbx failed: a usage error, sbxd unreachable, a request sbxd "
                "refused, a broken connection, a write error, a collected file it could not "
                "write\n"
                ".TP\n.B 126\nthe command was found but could not be executed\n"
                ".TP\n.B 127\nthe command was not found\n"
                ".TP\n.B 128+N\nthe command was killed by signal N; 137 also when sbxd killed "
                "it for its output, its memory or its token's expiry or revocation\n"
                ".TP\n.B 141\nstdout was a pipe whose reader went away: the task was cancelled "
                "and sbx ended by SIGPIPE\n"
                ".PP\n"
                "The other commands exit 0, or 125 when sbx failed; \\fBsbx audit\\fR exits 1 "
                "when verify finds a bad row or \\fB\\-\\-task\\fR or \\fB\\-\\-session\\fR finds "
                "nothing.\n"
                "With \\fB\\-\\-json\\fR a failure of sbx is also printed on stdout as\n"
                "{\"error\": {\"code\": ..., \"message\": ...}}.\n"
                ".SH ENVIRONMENT\n"
                ".TP\n.B SBX_SOCKET\nthe agents' socket, when \\fB\\-\\-socket\\fR is not given\n"
                ".TP\n.B SBX_ADMIN_SOCKET\nthe admin socket, when \\fB\\-\\-admin\\-socket\\fR is "
                "not given\n"
                ".TP\n.B SBX_TOKEN\nthe capability token of \\fBsbx exec\\fR, \\fBsbx "
                "session\\fR and \\fBsbx cp\\fR, when \\fB\\-\\-token\\fR is not given\n"
                ".SH SEE ALSO\n"
                "docs/PROTOCOL.md, docs/TOKENS.md and docs/AUDIT.md in sbx's source\n",
                f);
}

/* Writes the flags of opts (all of them, or only those that take a value), space-separated. */
static void sbx_doc_flags(FILE *f, const struct sbx_opt *opts, bool with_value_only)
{
    bool first = true;
    for (const struct sbx_opt *o = opts; o && o->flag; o++) {
        if (with_value_only && !o->arg) {
            continue;
        }
        (void)fprintf(f, "%s%s", first ? "" : " ", o->flag);
        first = false;
    }
}

void sbx_doc_bash(FILE *f)
{
    (void)fputs("# bash completion for sbx " SBX_VERSION " (written by sbx completion bash)\n"
                "_sbx()\n"
                "{\n"
                "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
                "    local i j cmd='' subs='' opts='' vals='' globals='",
                f);
    sbx_doc_flags(f, sbx_global_opts, false);
    (void)fputs("' gvals='", f);
    sbx_doc_flags(f, sbx_global_opts, true);
    (void)fputs("' cmds='", f);
    for (size_t i = 0; i < sbx_n_cmds; i++) {
        (void)fprintf(f, "%s ", sbx_cmds[i].name);
    }
    (void)fputs("help'\n"
                "    COMPREPLY=()\n"
                "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
                "        if [[ \" $gvals \" == *\" ${COMP_WORDS[i]} \"* ]]; then\n"
                "            ((i++))\n"
                "        elif [[ ${COMP_WORDS[i]} != -* ]]; then\n"
                "            cmd=${COMP_WORDS[i]}\n"
                "            break\n"
                "        fi\n"
                "    done\n"
                "    if [[ -z $cmd ]]; then\n"
                "        if [[ \" $gvals \" == *\" $prev \"* ]]; then\n"
                "            return\n"
                "        elif [[ $cur == -* ]]; then\n"
                "            COMPREPLY=($(compgen -W \"$globals\" -- \"$cur\"))\n"
                "        else\n"
                "            COMPREPLY=($(compgen -W \"$cmds\" -- \"$cur\"))\n"
                "        fi\n"
                "        return\n"
                "    fi\n"
                "    case $cmd in\n"
                "    help) subs=\"${cmds% help}\" ;;\n",
                f);
    for (size_t i = 0; i < sbx_n_cmds; i++) {
        const struct sbx_cmd *c = &sbx_cmds[i];
        (void)fprintf(f, "    %s) subs='", c->name);
        for (const char *const *s = c->subcmds; s && *s; s++) {
            (void)fprintf(f, "%s%s", s == c->subcmds ? "" : " ", *s);
        }
        (void)fputs("' opts='", f);
        sbx_doc_flags(f, c->opts, false);
        (void)fputs(c->opts ? " --help" : "--help", f);
        (void)fputs("' vals='", f);
        sbx_doc_flags(f, c->opts, true);
        (void)fputs("' ;;\n", f);
    }
    (void)fputs("    *) return ;;\n"
                "    esac\n"
                "    # exec: once its COMMAND has begun, the words are the command's.\n"
                "    if [[ $cmd == exec ]]; then\n"
                "        for ((j = i + 1; j < COMP_CWORD; j++)); do\n"
                "            if [[ ${COMP_WORDS[j]} == -- ]]; then\n"
                "                return\n"
                "            elif [[ \" $vals \" == *\" ${COMP_WORDS[j]} \"* ]]; then\n"
                "                ((j++))\n"
                "            elif [[ ${COMP_WORDS[j]} != -* ]]; then\n"
                "                return\n"
                "            fi\n"
                "        done\n"
                "    fi\n"
                "    if [[ \" $vals \" == *\" $prev \"* ]]; then\n"
                "        return\n"
                "    elif [[ $cur == -* ]]; then\n"
                "        COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
                "    elif ((COMP_CWORD == i + 1)) && [[ -n $subs ]]; then\n"
                "        COMPREPLY=($(compgen -W \"$subs\" -- \"$cur\"))\n"
                "    fi\n"
                "}\n"
                "complete -o default -F _sbx sbx\n",
                f);
}
