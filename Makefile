# sbx: one Makefile. `make demo` and `make test` do every step on a fresh Debian 12.
# Out-of-tree into build/, -MMD dependencies, quiet unless V=1, SAN=1 for ASan+UBSan.

ifeq ($(SAN),1)
BUILD    ?= build-san
else
BUILD    ?= build
endif
CC       ?= cc
DEB_PKGS := build-essential pkg-config libuv1-dev libmsgpack-dev libyaml-dev libseccomp-dev \
            libsqlite3-dev libjemalloc-dev libcmocka-dev libsodium-dev libjansson-dev python3 python3-msgpack \
            bubblewrap iproute2 procps sqlite3 libhttp-parser-dev prometheus musl-tools \
            groff-base man-db
PKGS     := libuv msgpack yaml-0.1 libseccomp sqlite3 jemalloc libsodium

Q := @
ifeq ($(V),1)
Q :=
endif

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
        -Wpointer-arith -Wvla -Wimplicit-fallthrough
ifeq ($(SAN),1)
OPT      := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
SANLD    := -fsanitize=address,undefined
else
OPT      := -O2 -g -D_FORTIFY_SOURCE=2
SANLD    :=
endif
CFLAGS_BASE := -std=gnu11 -D_GNU_SOURCE $(WARN) $(OPT) -fstack-protector-strong -MMD -MP -iquote daemon -iquote $(BUILD)
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# Debian's libhttp-parser-dev ships no pkg-config file.
HTTP_PARSER_LIBS := -lhttp_parser
CFLAGS   := $(CFLAGS_BASE) -fPIE
LDFLAGS  := -pie -Wl,-z,relro,-z,now $(SANLD)

# Each binary is built from folders (docs/ARCHITECTURE.md): sbxd from the composition root
# and its layers, sbxd-init from init/, sbx from cli/; lib/ and wire/ are shared.
L := daemon/lib
COMMON_SRCS := $(L)/util.c $(L)/fd.c $(L)/file.c $(L)/str.c $(L)/parse.c $(L)/clock.c $(L)/sys.c \
               $(L)/err.c $(L)/log.c $(L)/alloc.c $(L)/buf.c $(L)/strv.c
CLIENT_SRCS := $(COMMON_SRCS) daemon/wire/proto.c
SBXD_DIRS   := daemon daemon/api daemon/core daemon/egress daemon/sandbox daemon/token \
               daemon/audit daemon/metrics daemon/config daemon/wire daemon/lib
SBXD_SRCS   := $(foreach d,$(SBXD_DIRS),$(wildcard $(d)/*.c)) $(BUILD)/embedded.c
CLI_SRCS    := $(wildcard daemon/cli/*.c) $(CLIENT_SRCS)
# sbxd-init links only what is CHILD-SAFE of lib/.
INIT_SRCS   := $(wildcard daemon/init/*.c) $(L)/sys.c $(L)/util.c $(L)/fd.c $(L)/file.c \
               $(L)/str.c $(L)/err.c
LOAD_SRCS   := $(wildcard loadtest/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

BINS := $(BUILD)/sbxd $(BUILD)/sbxd-init $(BUILD)/sbx $(BUILD)/probe
CLI_DOCS := $(BUILD)/sbx.1 $(BUILD)/sbx.bash-completion
ifneq ($(LOAD_SRCS),)
BINS += $(BUILD)/sbx-load $(BUILD)/spawnbench
endif

.PHONY: all deps demo test unit e2e bench fmt lint clean images image-deps fuzz clients man \
        completion
all: deps
	$(Q)$(MAKE) --no-print-directory binaries

binaries: $(BINS) unit-bins $(CLI_DOCS)

# Installs what is missing; does nothing when everything is there.
# $(call apt_install,WHO,PACKAGES): installs those of PACKAGES that are missing, with
# apt-get update first when apt-get cannot find one.
apt_install = missing=""; for p in $(2); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "$(1): installing$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q $$missing >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q $$missing >/dev/null; } || { echo "$(1): apt-get failed"; exit 1; }; \
	fi

deps:
	@$(call apt_install,deps,$(DEB_PKGS))

# Pool images (images/, docs/IMAGES.md): only `make images` (and the image tests) need
# these; plain `make` never builds an image. IMAGES names some (default: every recipe).
IMAGE_PKGS := mmdebstrap
IMAGES_DIR ?= ./var/images
IMAGES     ?=
image-deps:
	@$(call apt_install,image-deps,$(IMAGE_PKGS))

images: image-deps $(BUILD)/sbxd
	$(Q)sh images/build.sh --out $(IMAGES_DIR) --sbxd $(BUILD)/sbxd $(IMAGES)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@[ -n "$(Q)" ] && echo "  CC   $<" || true
	$(Q)$(CC) $(CFLAGS) $(PKG_CFLAGS) -c $< -o $@

# Embedded default configuration: deploy/sbxd.yaml and pools/*.yaml compiled in.
$(BUILD)/embedded.c: daemon/config/gen_embedded.sh deploy/sbxd.yaml $(wildcard pools/*.yaml) $(wildcard seccomp/*.yaml)
	@mkdir -p $(BUILD)
	$(Q)sh daemon/config/gen_embedded.sh deploy/sbxd.yaml pools seccomp > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/$(BUILD)/embedded.o: $(BUILD)/embedded.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/sbxd: $(call obj,$(SBXD_SRCS))
	@[ -n "$(Q)" ] && echo "  LD   $@" || true
	$(Q)$(CC) $(LDFLAGS) $^ -o $@ $(PKG_LIBS) $(HTTP_PARSER_LIBS) -lpthread -lm

$(BUILD)/sbx: $(call obj,$(CLI_SRCS))
	@[ -n "$(Q)" ] && echo "  LD   $@" || true
	$(Q)$(CC) $(LDFLAGS) $^ -o $@ $(shell pkg-config --libs msgpack jansson) -lm

# sbx's man page and bash completion, written by sbx from its command table (the source of
# its help too: daemon/cli/sbx_doc.c). tests/e2e/test_cli.py renders the one with man and
# groff and drives the other with bash. `make install` (issue 34) is to install both.
$(BUILD)/sbx.1: $(BUILD)/sbx
	$(Q)$(BUILD)/sbx help --man > $@.tmp && mv $@.tmp $@

$(BUILD)/sbx.bash-completion: $(BUILD)/sbx
	$(Q)$(BUILD)/sbx completion bash > $@.tmp && mv $@.tmp $@

# spawnbench is plain libc (the unisolated floor and per-task bwrap in make bench); it is
# built without -iquote daemon so that <spawn.h> is the system's.
$(BUILD)/spawnbench: loadtest/spawnbench/spawnbench.c
	@mkdir -p $(BUILD)
	$(Q)$(CC) -std=gnu11 -D_GNU_SOURCE $(WARN) $(OPT) -fstack-protector-strong -fPIE $(LDFLAGS) $< -o $@

$(BUILD)/sbx-load: $(call obj,$(LOAD_SRCS) $(CLIENT_SRCS))
	@[ -n "$(Q)" ] && echo "  LD   $@" || true
	$(Q)$(CC) $(LDFLAGS) $^ -o $@ $(shell pkg-config --libs msgpack libuv yaml-0.1) -lm

# sbxd-init is pid 1 of every sandbox: static, no sanitizers (it outlives pivot_root and
# must not need the image's libraries). It is linked with musl: glibc's static start-up
# probes the CPU with dozens of CPUID instructions, each a trap to the hypervisor on a
# virtual machine, and that was 0.4 ms of every sandbox's creation (docs/BENCHMARKS.md).
# musl's headers leave out the kernel's: linux/, asm/ and asm-generic/ are linked in from
# the system's. INIT_LIBC=glibc builds it with glibc instead (for comparisons).
INIT_LIBC   ?= musl
INIT_CFLAGS := -std=gnu11 -D_GNU_SOURCE $(WARN) -O2 -g -D_FORTIFY_SOURCE=2 -MMD -MP -iquote daemon
ifeq ($(INIT_LIBC),musl)
INIT_CC     := musl-gcc
INIT_INC    := $(BUILD)/musl-include
INIT_CFLAGS += -isystem $(INIT_INC)
MULTIARCH   := $(shell $(CC) -print-multiarch 2>/dev/null)
else
INIT_CC     := $(CC)
INIT_INC    :=
endif

$(BUILD)/musl-include:
	@mkdir -p $@
	$(Q)ln -sfn /usr/include/linux $@/linux
	$(Q)ln -sfn /usr/include/asm-generic $@/asm-generic
	$(Q)ln -sfn /usr/include/$(MULTIARCH)/asm $@/asm

$(BUILD)/init-obj-$(INIT_LIBC)/%.o: %.c | $(INIT_INC)
	@mkdir -p $(dir $@)
	@[ -n "$(Q)" ] && echo "  CC   $< (static, $(INIT_LIBC))" || true
	$(Q)$(INIT_CC) $(INIT_CFLAGS) -c $< -o $@

$(BUILD)/sbxd-init: $(patsubst %.c,$(BUILD)/init-obj-$(INIT_LIBC)/%.o,$(INIT_SRCS))
	@[ -n "$(Q)" ] && echo "  LD   $@" || true
	$(Q)$(INIT_CC) -static $^ -o $@

$(BUILD)/probe: tests/helpers/probe.c
	@mkdir -p $(BUILD)
	@[ -n "$(Q)" ] && echo "  LD   $@" || true
	$(Q)$(CC) $(INIT_CFLAGS) -static $< -o $@

# Unit tests: tests/unit/test_<module>.c links daemon/<folder>/<module>.c and the common sources;
# TEST_<module>_EXTRA names more sources (proto.c when a test needs it).
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
# What reading YAML (the embedded files, a file from disk, the node tree) takes.
YAML_SRCS := $(BUILD)/embedded.c $(L)/textfile.c $(L)/yamlnode.c
# The config's parts beside config.c, and the validators of wire/ it reuses.
CONFIG_SRCS := daemon/config/config_walk.c daemon/config/config_egress.c \
               daemon/config/config_pool.c daemon/wire/egress_parse.c daemon/wire/egress_path.c \
               daemon/wire/netaddr.c
TEST_config_EXTRA := $(YAML_SRCS) $(CONFIG_SRCS)
SECCOMP_SRCS := daemon/sandbox/seccomp_profile.c daemon/sandbox/seccomp_denied.c \
                daemon/sandbox/seccomp_compile.c daemon/sandbox/seccomp_memfd.c
TEST_seccomp_EXTRA := $(SECCOMP_SRCS) $(YAML_SRCS)
TEST_hist_EXTRA := loadtest/hist.c
CGROUP_SRCS := daemon/sandbox/cgroup_root.c daemon/sandbox/cgroup_file.c \
               daemon/sandbox/cgroup_v1.c daemon/sandbox/cgroup_v2.c
TEST_cgroup_EXTRA := $(CGROUP_SRCS)
TEST_outcap_EXTRA :=
TEST_idslot_EXTRA :=
TEST_workq_EXTRA := $(L)/loopwake.c
TEST_audit_EXTRA := daemon/audit/audit_writer.c daemon/audit/audit_prune.c \
                    daemon/audit/audit_limit.c daemon/audit/audit_gaps.c \
                    $(L)/scrub.c daemon/audit/audit_query.c \
                    daemon/wire/proto.c $(L)/loopwake.c
# lib/scrub.c with its context matchers, alone (tests/unit/scrub_corpus/ holds its corpora).
TEST_scrub_EXTRA := $(L)/scrub_context.c
TEST_metrics_EXTRA := daemon/metrics/registry.c
TEST_image_EXTRA :=
TEST_token_EXTRA := daemon/token/token_db.c daemon/token/token_secret.c \
                    daemon/token/token_policy.c daemon/token/token_mount.c $(L)/scrub.c
TEST_egress_route_EXTRA := daemon/wire/egress_path.c
TEST_workspace_EXTRA := daemon/sandbox/workspace_collect.c daemon/wire/wspath.c
TEST_spawn_EXTRA := daemon/sandbox/child.c daemon/sandbox/cgroup.c $(CGROUP_SRCS) \
                    daemon/sandbox/seccomp_memfd.c daemon/sandbox/forkserver.c \
                    daemon/sandbox/image.c
# Link seams (tests/unit/fakes/): pool.c and sandbox.c linked alone, each with fakes of
# what it calls, which log the calls for the test to compare.
FAKES := tests/unit/fakes
TEST_pool_EXTRA := $(FAKES)/fake_calls.c $(FAKES)/fake_sched.c $(FAKES)/fake_kit.c \
                   $(FAKES)/fake_sandbox.c $(FAKES)/fake_metrics.c $(FAKES)/fake_stats.c
TEST_sandbox_EXTRA := $(FAKES)/fake_calls.c $(FAKES)/fake_kit.c $(FAKES)/fake_cgroup.c \
                      $(FAKES)/fake_netns.c $(FAKES)/fake_image.c $(FAKES)/fake_spawn.c \
                      $(FAKES)/fake_forkserver.c $(FAKES)/fake_workq.c daemon/sandbox/idslot.c \
                      daemon/sandbox/task_spec.c daemon/wire/egress_parse.c \
                      daemon/sandbox/sandbox_work.c
TEST_task_spec_EXTRA := daemon/wire/egress_parse.c
# api/server.c alone over a real loop and socket: the handler is the test's, logging to
# the fakes' call log; the clients pack with proto.c.
TEST_server_EXTRA := $(FAKES)/fake_calls.c daemon/wire/proto.c
# core/task.c alone over a real loop and real pipes: its pool, sandbox, audit, scheduler,
# metrics, egress and token store are fakes; its client is the test's sink.
TEST_task_EXTRA := $(FAKES)/fake_calls.c $(FAKES)/fake_pool.c $(FAKES)/fake_sandbox_task.c \
                   $(FAKES)/fake_task_audit.c $(FAKES)/fake_audit.c $(FAKES)/fake_sched.c \
                   $(FAKES)/fake_metrics.c $(FAKES)/fake_egress.c $(FAKES)/fake_token.c \
                   $(FAKES)/fake_workq.c $(FAKES)/fake_session.c daemon/core/outcap.c \
                   daemon/core/task_files.c daemon/sandbox/task_spec.c daemon/sandbox/workspace.c \
                   daemon/sandbox/workspace_collect.c daemon/wire/wspath.c \
                   daemon/wire/egress_parse.c daemon/wire/proto.c
.SECONDARY: $(call obj,$(wildcard $(FAKES)/*.c))
# Whatever links lib/scrub.c links its context matchers too.
TEST_audit_EXTRA += $(L)/scrub_context.c
TEST_token_EXTRA += $(L)/scrub_context.c
# Fuzz targets (tests/fuzz/README.md): tests/fuzz/fuzz_<name>.c and the sources it takes
# apart. make test links each with replay.c and runs it over its committed corpus
# (tests/fuzz/corpus/<name>/); `make fuzz` links them with libFuzzer and searches for more.
FUZZ_NAMES := proto egress config seccomp wspath
FUZZ_proto_SRCS := daemon/wire/proto.c
FUZZ_egress_SRCS := daemon/wire/egress_parse.c daemon/wire/egress_path.c \
                    daemon/wire/egress_inspect.c daemon/sandbox/task_spec.c
FUZZ_egress_LIBS := $(HTTP_PARSER_LIBS)
FUZZ_config_SRCS := daemon/config/config.c $(CONFIG_SRCS) $(YAML_SRCS)
FUZZ_seccomp_SRCS := daemon/sandbox/seccomp.c $(SECCOMP_SRCS) $(YAML_SRCS)
FUZZ_wspath_SRCS := daemon/wire/wspath.c
FUZZ_REPLAYS := $(patsubst %,$(BUILD)/tests/fuzz_%,$(FUZZ_NAMES))
FUZZ_LIBS = $(shell pkg-config --libs msgpack yaml-0.1 libseccomp)
unit-bins: $(UNIT_BINS) $(FUZZ_REPLAYS)
$(UNIT_BINS): $(BUILD)/sbxd-init $(BUILD)/probe

.SECONDEXPANSION:
$(BUILD)/tests/test_%: tests/unit/test_%.c $$(call obj,$$(wildcard daemon/*/$$*.c) $$(TEST_$$*_EXTRA) $(COMMON_SRCS))
	@mkdir -p $(dir $@)
	@[ -n "$(Q)" ] && echo "  TEST $@" || true
	$(Q)$(CC) $(CFLAGS) $(PKG_CFLAGS) $(LDFLAGS) $(filter %.c %.o,$^) -o $@ $(PKG_LIBS) -lcmocka -lpthread -lm

$(BUILD)/tests/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c tests/fuzz/fuzz.h $$(call obj,$$(FUZZ_$$*_SRCS) $(COMMON_SRCS))
	@mkdir -p $(dir $@)
	@[ -n "$(Q)" ] && echo "  FUZZ $@ (replay)" || true
	$(Q)$(CC) $(CFLAGS) $(PKG_CFLAGS) $(LDFLAGS) $(filter %.c %.o,$^) -o $@ $(FUZZ_LIBS) $(FUZZ_$*_LIBS) -lm

# libFuzzer with ASan and UBSan (clang, installed when missing, as lint's tools are):
# FUZZ_SECONDS per target (default 60), FUZZ names some (default: all); FUZZ_MERGE=1 adds
# what was found to the committed corpus, minimized.
FUZZ_BUILD ?= build-fuzz
FUZZ ?= $(FUZZ_NAMES)
FUZZ_CFLAGS := -std=gnu11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer \
               -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
               -iquote daemon -iquote $(BUILD)
FUZZ_PKGS := clang libclang-rt-14-dev
fuzz: deps
	@$(call apt_install,fuzz,$(FUZZ_PKGS))
	$(Q)$(MAKE) --no-print-directory $(patsubst %,$(FUZZ_BUILD)/fuzz_%,$(FUZZ))
	$(Q)sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ)

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $$(FUZZ_$$*_SRCS) $(COMMON_SRCS)
	@mkdir -p $(dir $@)
	@[ -n "$(Q)" ] && echo "  FUZZ $@ (libFuzzer)" || true
	$(Q)clang $(FUZZ_CFLAGS) $(shell pkg-config --cflags msgpack yaml-0.1 libseccomp) \
	    $(filter %.c,$^) -o $@ $(FUZZ_LIBS) $(FUZZ_$*_LIBS) -lm

man: $(BUILD)/sbx.1
completion: $(BUILD)/sbx.bash-completion

demo: all
	$(Q)BUILD=$(BUILD) sh tests/demo.sh

# Real msgpack-rpc clients for tests/e2e/test_clients.py: Debian's neovim, and npm packages
# pinned by tests/clients/package-lock.json, installed into $(BUILD)/npm by `npm ci` (Debian
# 12's nodejs ships npm apart; NodeSource's includes it). A failure here fails the build
# of the tests: they never skip a client.
NPM_DIR := $(BUILD)/npm
clients: $(NPM_DIR)/.installed
	@$(call apt_install,clients,neovim)

$(NPM_DIR)/.installed: tests/clients/package.json tests/clients/package-lock.json
	@$(call apt_install,clients,nodejs)
	@command -v npm >/dev/null || { $(call apt_install,clients,npm); }
	@mkdir -p $(NPM_DIR)
	$(Q)cp tests/clients/package.json tests/clients/package-lock.json $(NPM_DIR)/
	$(Q)npm ci --prefix $(NPM_DIR) --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

test: all clients
	$(Q)sh tests/run.sh all $(BUILD)

unit: all
	$(Q)sh tests/run.sh unit $(BUILD)

e2e: all clients
	$(Q)sh tests/run.sh e2e $(BUILD)

bench: all
	$(Q)sh loadtest/bench.sh

C_SOURCES = daemon/*.[ch] daemon/*/*.[ch] tests/unit/*.c tests/unit/fakes/*.[ch] tests/helpers/*.c tests/fuzz/*.c tests/fuzz/*.h \
	loadtest/*.c loadtest/*.h \
	loadtest/spawnbench/*.c

fmt:
	clang-format -i $(C_SOURCES)

# clang-format for the C, shellcheck (warnings and errors) for the shell scripts, and the
# layer check (every include points down, in docs/ARCHITECTURE.md's order) and the naming
# check (every function named for its file; make test runs both, as tests/e2e/test_layers.py
# and test_names.py); installs shellcheck when it is missing, as deps does its
# packages.
LINT_PKGS := shellcheck clang-format
lint:
	@$(call apt_install,lint,$(LINT_PKGS))
	python3 tests/lint/layers.py
	python3 tests/lint/prefix.py
	clang-format --dry-run -Werror $(C_SOURCES)
	shellcheck -s sh -S warning -x loadtest/*.sh tests/*.sh tests/fuzz/*.sh .ci/run

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' -type f 2>/dev/null)
