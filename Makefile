# make test: everything a change must pass (vet, the race-enabled suite on
# real redis-server nodes, the fuzz seeds). make fuzz / make soak run longer.
GO ?= go
FUZZTIME ?= 30s

.PHONY: test redis vet fuzz soak bench

test: redis vet
	$(GO) test -race -count=1 -timeout 9m ./...

redis:
	@./.ci/ensure-redis

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseURL$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzOptions$$' -fuzztime $(FUZZTIME) .

soak: redis
	REDLOCK_SOAK=$${REDLOCK_SOAK:-20} $(GO) test -race -count=1 -timeout 60m -run '^TestChaos' -v .

bench:
	@./.ci/ensure-redis
	cd bench && $(GO) run . -quick
