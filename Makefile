# make test: everything a change must pass (vet, the race-enabled suite on
# real redis-server nodes, the fuzz seeds). make fuzz / make soak run longer.
GO ?= go
FUZZTIME ?= 30s
# Every other Go module in the repository (bench/, and adapters to come).
MODULES := $(sort $(patsubst ./%/go.mod,%,$(shell find . -mindepth 2 -name go.mod -not -path './.git/*')))

.PHONY: test redis vet fuzz soak bench compat modelcheck stress

# The other modules' tests run side by side (mostly waiting on their
# redis-servers), each module's output kept together and shown in order.
test: redis vet
	$(GO) test -race -count=1 -timeout 9m ./...
	@dir=$$(mktemp -d); for m in $(MODULES); do f=$$dir/$$(echo $$m | tr / _); (cd $$m && $(GO) test -race -count=1 -timeout 9m ./... > $$f.log 2>&1; echo $$? > $$f.rc) & done; wait; \
	rc=0; for m in $(MODULES); do f=$$dir/$$(echo $$m | tr / _); echo "== $$m"; cat $$f.log; [ "$$(cat $$f.rc)" = 0 ] || rc=1; done; rm -rf $$dir; exit $$rc

redis:
	@./.ci/ensure-redis

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
modelcheck: redis
	$(GO) run ./internal/model/cmd/modelcheck -steps $(MODEL_STEPS) -walks $(MODEL_WALKS)
	REDLOCK_MODEL_DEEP=1 $(GO) test -count=1 -timeout 60m -run 'TestCounterexamples|TestQueuedCall' -v ./internal/model | grep -E '^(---|    ---|ok|FAIL)|states|violated'
	REDLOCK_MODEL_CALLS=100000 $(GO) test -count=1 -timeout 60m -run '^TestModelScriptsMatchRedis$$' -v . | grep -E '^(---|ok|FAIL)|calls in'

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseURL$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzOptions$$' -fuzztime $(FUZZTIME) .

soak: redis
	REDLOCK_SOAK=$${REDLOCK_SOAK:-20} $(GO) test -race -count=1 -timeout 60m -run '^TestChaos' -v .

# make stress: each suite STRESS_COUNT times with -race -count=1 under
# GOMAXPROCS=2, beside two busy loops that it starts and stops on every
# exit, to catch the tests that fail only on a loaded machine. The suites:
# the root module's and every other module's but bench's (its tests check
# report text, not timing). Prints each run and a summary, keeps the
# failing runs' output in a file whose path it prints, and fails if any run
# failed. Narrow it with STRESS_MODULES (directories; . is the root) and
# STRESS_RUN (a -run pattern, taken as written, a $ included).
STRESS_COUNT ?= 5
STRESS_MODULES ?= . $(filter-out bench,$(MODULES))
STRESS_RUN ?=
STRESS_TIMEOUT ?= 20m
stress: redis
	@log=$$(mktemp "$${TMPDIR:-/tmp}/redlock-stress.XXXXXX") && out=$$(mktemp) || exit 1; burners=; \
	trap 'kill $$burners 2>/dev/null; rm -f "$$out"; [ -s "$$log" ] || rm -f "$$log"' EXIT; trap 'exit 130' INT TERM HUP; \
	for i in 1 2; do sh -c 'while :; do :; done' & burners="$$burners $$!"; done; \
	echo "stress: $(STRESS_COUNT) run(s) of each of: $(STRESS_MODULES); GOMAXPROCS=2, busy loops$$burners; failing output to $$log"; \
	runs=0; failed=; \
	for m in $(STRESS_MODULES); do n=0; while [ $$n -lt $(STRESS_COUNT) ]; do n=$$((n+1)); runs=$$((runs+1)); \
		start=$$(date +%s); \
		if (cd $$m && GOMAXPROCS=2 $(GO) test -race -count=1 -timeout $(STRESS_TIMEOUT) $(if $(value STRESS_RUN),-run '$(value STRESS_RUN)') ./... > "$$out" 2>&1); then r=PASS; else r=FAIL; fi; \
		echo "$$r $$m run $$n/$(STRESS_COUNT) ($$(($$(date +%s)-start))s)"; \
		[ $$r = PASS ] && continue; failed="$$failed $$m#$$n"; \
		grep -E '^[[:space:]]*--- FAIL|^FAIL[[:space:]]|^panic:' "$$out" | sed 's/^/    /'; \
		{ echo "===== $$m run $$n/$(STRESS_COUNT)"; cat "$$out"; } >> "$$log"; \
	done; done; \
	if [ -z "$$failed" ]; then echo "stress: all $$runs runs passed"; exit 0; fi; \
	echo "stress: $$(echo $$failed | wc -w) of $$runs runs failed:$$failed; their output: $$log"; exit 1

# The oldest Go the go.mod allows: vet and the unit tests (no Redis needed)
# with that toolchain, which the go command fetches from the module proxy.
COMPAT_GO ?= go1.22.12
compat:
	GOTOOLCHAIN=$(COMPAT_GO) $(GO) vet . ./redlocktest ./cmd/...
	GOTOOLCHAIN=$(COMPAT_GO) $(GO) test -count=1 -run '^TestUnit' .

bench:
	@./.ci/ensure-redis
	cd bench && $(GO) run . -quick
