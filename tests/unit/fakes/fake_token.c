/* SPDX-License-Identifier: MIT */
/* token/token.c as a task sees it: one link, which the test's expiry or revocation reaches
 * through task_token_kill (fakes.h). */
#include "token/token.h"

#include "fakes.h"

struct token {
    int uses; /* taken by token_attach */
};

static struct token the_token;
struct token *const fake_token = &the_token;
struct token_link *fake_token_link;

void token_attach(struct token_store *s, const struct token *tok, struct token_link *l)
{
    (void)s;
    fake_call("token_attach");
    l->tok = (struct token *)tok;
    the_token.uses++;
    fake_token_link = l;
}

void token_detach(struct token_link *l)
{
    if (!l->tok) {
        return;
    }
    fake_call("token_detach");
    l->tok = NULL;
    if (l == fake_token_link) {
        fake_token_link = NULL;
    }
}
