# make test: everything a change must pass (vet, the race-enabled suite on
# real redis-server nodes, the fuzz seeds). make fuzz / make soak run longer.
GO ?= go
FUZZTIME ?= 30s
# Every other Go module in the repository (bench/, and adapters to come).
MODULES := $(sort $(patsubst ./%/go.mod,%,$(shell find . -mindepth 2 -name go.mod -not -path './.git/*')))

.PHONY: test redis vet fuzz soak bench compat modelcheck

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

# The oldest Go the go.mod allows: vet and the unit tests (no Redis needed)
# with that toolchain, which the go command fetches from the module proxy.
COMPAT_GO ?= go1.22.12
compat:
	GOTOOLCHAIN=$(COMPAT_GO) $(GO) vet . ./redlocktest ./cmd/...
	GOTOOLCHAIN=$(COMPAT_GO) $(GO) test -count=1 -run '^TestUnit' .

bench:
	@./.ci/ensure-redis
	cd bench && $(GO) run . -quick
