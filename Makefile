# make test: everything a change must pass (vet, the race-enabled suite on
# real redis-server nodes and, for the guard and the command's psql recipe,
# a real PostgreSQL server, the fuzz seeds). make fuzz / make soak run longer.
GO ?= go
FUZZTIME ?= 30s
# Every other Go module in the repository: the adapters (goredis, rueidis,
# valkey), redlockotel, bench and releasetest (the consumer's build). go.work
# makes them one workspace: each module requires its siblings at their last
# release, and go.work's replace lines map that version onto the directories.
MODULES := $(sort $(patsubst ./%/go.mod,%,$(shell find . -mindepth 2 -name go.mod -not -path './.git/*')))

.PHONY: test redis postgres vet apicheck fuzz soak bench compat modelcheck release tidy stress fairness

# make test's suites run side by side, each one's output kept together and
# shown in order with its time: root (the root module's packages but the
# model), diff and diff-rw (the root package's differential tests of the
# scripts, DIFF_TESTS, one each: bound by the CPU and by the round trips of
# their pipelines, suites of their own so that they run beside the root
# package's waiting tests and each other instead of one after another),
# model, and every other module. diff, diff-rw and model are bound by the
# CPU and time nothing (the differential tests' tolerance of clocks grows
# with how late a call is checked): they run niced, so that the tests that
# bound waits on 100 ms node timeouts get the CPU first. Most tests wait on
# their redis-servers' leases and timeouts, not on the CPU; the root
# package's slowest waiting tests run -parallel (main_test.go says which).
# model (internal/model, the searches of the model) runs without -race: the
# package starts no goroutine and imports nothing that does, so the race
# detector has nothing to check there, and it made the searches about 15
# times slower (over 600 s against 48 s, on 2 cores at a load of 12); the
# model's code still runs under -race in the root package's tests that use
# it. The root module's packages, which every module uses, are compiled once
# first (a run of no test), not by every suite at once.
# releasetest's TestConsumerBuild releases a clone of HEAD into a module
# proxy directory and builds and runs a consumer's program from it. attack
# is the root package's attacks on waiting (turnsattack_test.go,
# newsattack_test.go, lazyintentattack_test.go: tests of 3 s windows, one
# after another), a suite of its own so that it runs beside the root
# package's other tests instead of after them.
TEST_FLAGS := -race -count=1 -timeout 9m
DIFF_TESTS := ^(TestModelScriptsMatchRedis|TestModelRWScriptsMatchRedis)$$
ATTACK_TESTS := ^Test(Turns|News|LazyIntent)Attack
DIFF_MUTEX := ^TestModelScriptsMatchRedis$$
DIFF_RW := ^TestModelRWScriptsMatchRedis$$
MODEL_PKG := github.com/redlock-go/redlock/internal/model
ROOT_PKGS = $$($(GO) list ./... | grep -vx '$(MODEL_PKG)')
test: redis postgres vet apicheck
	$(GO) test $(TEST_FLAGS) -run '^$$' $(ROOT_PKGS) > /dev/null
	@dir=$$(mktemp -d) || exit 1; trap 'rm -rf "$$dir"' EXIT; \
	suite() { name=$$1; shift; (s=$$(date +%s); "$$@" > "$$dir/$$name.log" 2>&1; echo $$? $$(($$(date +%s)-s)) > "$$dir/$$name.rc") & }; \
	suite root $(GO) test $(TEST_FLAGS) -parallel 4 -skip '$(DIFF_TESTS)|$(ATTACK_TESTS)' $(ROOT_PKGS); \
	suite attack $(GO) test $(TEST_FLAGS) -run '$(ATTACK_TESTS)' .; \
	suite diff nice -n 10 $(GO) test $(TEST_FLAGS) -run '$(DIFF_MUTEX)' .; \
	suite diff-rw nice -n 10 $(GO) test $(TEST_FLAGS) -run '$(DIFF_RW)' .; \
	suite model nice -n 10 $(GO) test -count=1 -timeout 9m $(MODEL_PKG); \
	for m in $(MODULES); do suite $$(echo $$m | tr / _) sh -c 'cd "$$1" && shift && exec "$$@"' - $$m $(GO) test $(TEST_FLAGS) ./...; done; \
	wait; rc=0; \
	for name in root attack diff diff-rw model $(subst /,_,$(MODULES)); do read code secs < "$$dir/$$name.rc"; \
		echo "== $$name ($${secs}s)"; cat "$$dir/$$name.log"; [ "$$code" = 0 ] || rc=1; done; exit $$rc

redis:
	@./.ci/ensure-redis

# The guard's tests run PostgreSQL themselves (internal/pgtest); this makes
# sure its binaries are there, installing Debian's package when we are root.
postgres:
	@./.ci/ensure-postgres

vet:
	$(GO) vet ./...
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

# The model (internal/model, docs/model.md): the exhaustive search of the
# small configuration deeper than go test's, random walks of the large one,
# the counterexamples' searches with each mechanism on, and the
# differential tests of the scripts with more calls. Prints states
# explored, depth and time.
MODEL_STEPS ?= 9
MODEL_WALKS ?= 100000
MODEL_RW_STEPS ?= 8
MODEL_FAMILY_STEPS ?= 7
MODEL_FAMILY_WAITS ?= 10
MODEL_VANISH_STEPS ?= 12
MODEL_CRASH_STEPS ?= 11
MODEL_VANISH_WALKS ?= 20000
modelcheck: redis
	$(GO) run ./internal/model/cmd/modelcheck -steps $(MODEL_STEPS) -walks $(MODEL_WALKS) -rw-steps $(MODEL_RW_STEPS) -rw-walks $(MODEL_WALKS) -served-walks $(MODEL_WALKS) \
		-multi-steps $(MODEL_FAMILY_STEPS) -multi-waits-steps $(MODEL_FAMILY_WAITS) -multi-walks $(MODEL_WALKS) -sem-steps $(MODEL_FAMILY_STEPS) -sem-waits-steps $(MODEL_FAMILY_WAITS) -sem-walks $(MODEL_WALKS) \
		-vanish-steps $(MODEL_VANISH_STEPS) -vanish-walks $(MODEL_VANISH_WALKS) -crash-steps $(MODEL_CRASH_STEPS) -crash-walks $(MODEL_VANISH_WALKS)
	$(GO) run ./internal/model/cmd/modelcheck -off intents -steps 0 -walks 0 -multi-steps $(MODEL_FAMILY_STEPS) -multi-waits-steps $(MODEL_FAMILY_WAITS) -multi-walks $(MODEL_WALKS) -sem-steps $(MODEL_FAMILY_STEPS) -sem-waits-steps $(MODEL_FAMILY_WAITS) -sem-walks $(MODEL_WALKS)
	REDLOCK_MODEL_DEEP=1 $(GO) test -count=1 -timeout 60m -run 'TestCounterexamples|TestQueuedCall|TestRWCounterexamples|TestVanishCounterexamples|TestVanishLimits' -v ./internal/model | grep -E '^(---|    ---|ok|FAIL)|states|walks|violated'
	REDLOCK_MODEL_CALLS=100000 $(GO) test -count=1 -timeout 60m -run '^(TestModelScriptsMatchRedis|TestModelRWScriptsMatchRedis)$$' -v . | grep -E '^(---|ok|FAIL)|calls in'

# make fairness: the bounds on waiting (issue 27) over FAIR_RUNS runs each
# (make test makes one): every MultiMutex owner served, a Semaphore waiter
# not passed over, readers beside a looping writer, a reader's wait in
# write holds. Prints each run's numbers.
FAIR_RUNS ?= 10
fairness: redis
	REDLOCK_FAIR_RUNS=$(FAIR_RUNS) $(GO) test -count=1 -timeout 30m -run '^(TestMultiMutexNoOwnerStarves|TestSemaphoreWaiterIsNotPassedOver|TestRWMutexReadersAreNotStarved|TestRWMutexReaderWaitsBoundedWriteHolds)$$' -v . | grep -E '^(---|ok|FAIL)|run [0-9]|per attempt|read holds in|write holds that began'

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseURL$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzOptions$$' -fuzztime $(FUZZTIME) .

soak: redis
	REDLOCK_SOAK=$${REDLOCK_SOAK:-20} $(GO) test -race -count=1 -timeout 60m -run '^TestChaos' -v .

# make stress: each suite STRESS_COUNT times with -race -count=1 under
# GOMAXPROCS=2, beside two busy loops that it starts and stops on every
# exit, to catch the tests that fail only on a loaded machine. The suites:
# the root module's (but internal/model: its searches have no timing in
# them, and make test runs them without -race) and every other module's but
# bench's (its tests check report text, not timing) and releasetest's (a
# consumer's build, no timing). Prints each run and a summary, keeps the
# failing runs' output in a file whose path it prints, and fails if any run
# failed. Narrow it with STRESS_MODULES (directories; . is the root) and
# STRESS_RUN (a -run pattern, taken as written, a $ included).
STRESS_COUNT ?= 5
STRESS_MODULES ?= . $(filter-out bench releasetest,$(MODULES))
STRESS_RUN ?=
STRESS_TIMEOUT ?= 20m
stress: redis postgres
	@log=$$(mktemp "$${TMPDIR:-/tmp}/redlock-stress.XXXXXX") && out=$$(mktemp) || exit 1; burners=; \
	trap 'kill $$burners 2>/dev/null; rm -f "$$out"; [ -s "$$log" ] || rm -f "$$log"' EXIT; trap 'exit 130' INT TERM HUP; \
	for i in 1 2; do sh -c 'while :; do :; done' & burners="$$burners $$!"; done; \
	echo "stress: $(STRESS_COUNT) run(s) of each of: $(STRESS_MODULES); GOMAXPROCS=2, busy loops$$burners; failing output to $$log"; \
	runs=0; failed=; \
	for m in $(STRESS_MODULES); do n=0; while [ $$n -lt $(STRESS_COUNT) ]; do n=$$((n+1)); runs=$$((runs+1)); \
		start=$$(date +%s); \
		pkgs=./...; [ "$$m" != . ] || pkgs=$(ROOT_PKGS); \
		if (cd $$m && GOMAXPROCS=2 $(GO) test -race -count=1 -timeout $(STRESS_TIMEOUT) $(if $(value STRESS_RUN),-run '$(value STRESS_RUN)') $$pkgs > "$$out" 2>&1); then r=PASS; else r=FAIL; fi; \
		echo "$$r $$m run $$n/$(STRESS_COUNT) ($$(($$(date +%s)-start))s)"; \
		[ $$r = PASS ] && continue; failed="$$failed $$m#$$n"; \
		grep -E '^[[:space:]]*--- FAIL|^FAIL[[:space:]]|^panic:' "$$out" | sed 's/^/    /'; \
		{ echo "===== $$m run $$n/$(STRESS_COUNT)"; cat "$$out"; } >> "$$log"; \
	done; done; \
	if [ -z "$$failed" ]; then echo "stress: all $$runs runs passed"; exit 0; fi; \
	echo "stress: $$(echo $$failed | wc -w) of $$runs runs failed:$$failed; their output: $$log"; exit 1

# Each released module at the oldest Go its go.mod allows (README, Install):
# vet and the unit tests (no Redis needed) with that toolchain, which the go
# command fetches from the module proxy. Outside the workspace (go.work says
# the newest go line of all), an adapter with the root replaced by this
# directory in a temporary copy of its go.mod (-modfile).
COMPAT_GO ?= go1.22.12
compat_module = @echo "== $(1) with $(2)"; tmp=$$(mktemp -d); cp $(1)/go.mod $(1)/go.sum $$tmp/ && \
	$(GO) mod edit -replace=github.com/redlock-go/redlock=$(CURDIR) $$tmp/go.mod && \
	(cd $(1) && export GOWORK=off GOTOOLCHAIN=$(2) GOFLAGS="$$GOFLAGS -modfile=$$tmp/go.mod" && \
	 $(GO) vet ./... && $(GO) test -count=1 -run '$(3)' ./...); rc=$$?; rm -rf $$tmp; exit $$rc
compat:
	GOWORK=off GOTOOLCHAIN=$(COMPAT_GO) $(GO) vet . ./guard ./redlocktest ./cmd/...
	GOWORK=off GOTOOLCHAIN=$(COMPAT_GO) $(GO) test -count=1 -run '^TestUnit' .
	$(call compat_module,goredis,go1.26.0,^(TestNewNodeRefusesWhatCannotWork|TestSlot)$$)
	$(call compat_module,rueidis,go1.25.0,^TestNewNodeRejects$$)
	$(call compat_module,valkey,go1.25.0,^TestNewNodeRejects$$)
	$(call compat_module,redlockotel,go1.26.0,^TestErrorType$$)

# The API check against each module's last release tag (.ci/apicheck): an
# incompatible change needs a "Changed (breaking)" entry in CHANGELOG.md's
# Unreleased section. Says so and passes while no release exists.
apicheck:
	@./.ci/apicheck

# make release VERSION=vX.Y.Z: checks, makes the siblings require vX.Y.Z,
# tags every module, prints what to push; never pushes (.ci/release).
release:
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=vX.Y.Z"; exit 1; }
	./.ci/release $(VERSION)

# go mod tidy in every module. In a workspace, go mod tidy ignores go.work and
# would fetch the siblings' required version from the module proxy (not
# there before it is pushed): tidy each module with the siblings replaced by
# their directories, then drop the replace lines again.
tidy:
	$(GO) mod tidy
	@set -e; for m in $(MODULES); do (cd $$m && \
	  for s in $$(awk '$$3 == "=>" && $$1 ~ /^github.com\/redlock-go\/redlock/ { print $$1 "=" $$4 }' $(CURDIR)/go.work); do \
	    $(GO) mod edit -replace=$${s%%=*}=$(CURDIR)/$${s#*=}; done; \
	  status=0; GOWORK=off $(GO) mod tidy || status=$$?; \
	  for s in $$(awk '$$3 == "=>" && $$1 ~ /^github.com\/redlock-go\/redlock/ { print $$1 }' $(CURDIR)/go.work); do \
	    $(GO) mod edit -dropreplace=$$s; done; exit $$status); done

bench:
	@./.ci/ensure-redis
	cd bench && $(GO) run . -quick
