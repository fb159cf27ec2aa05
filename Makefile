# make test: everything a change must pass (vet, the race-enabled suite on
# real redis-server nodes, the fuzz seeds). make fuzz / make soak run longer.
GO ?= go
FUZZTIME ?= 30s
# Every other Go module in the repository (bench/, and adapters to come).
MODULES := $(sort $(patsubst ./%/go.mod,%,$(shell find . -mindepth 2 -name go.mod -not -path './.git/*')))

.PHONY: test redis vet fuzz soak bench

test: redis vet
	$(GO) test -race -count=1 -timeout 9m ./...
	@for m in $(MODULES); do echo "== $$m"; (cd $$m && $(GO) test -race -count=1 -timeout 9m ./...) || exit 1; done

redis:
	@./.ci/ensure-redis

vet:
	$(GO) vet ./...
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseURL$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzOptions$$' -fuzztime $(FUZZTIME) .

soak: redis
	REDLOCK_SOAK=$${REDLOCK_SOAK:-20} $(GO) test -race -count=1 -timeout 60m -run '^TestChaos' -v .

bench:
	@./.ci/ensure-redis
	cd bench && $(GO) run . -quick
