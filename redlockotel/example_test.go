package redlockotel_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	promexporter "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlockotel"
	"github.com/redlock-go/redlock/redlocktest"
)

// Serve a Client's metrics to Prometheus: the OpenTelemetry Prometheus
// exporter reads them at every scrape of /metrics. (Here three local
// redis-server nodes stand in for the masters, and the page is read once
// to show some of its lines; in a service, give promhttp.Handler to your
// HTTP server and use the default registry.)
func Example_prometheus() {
	nodes, err := redlocktest.Launch(3)
	if err != nil {
		log.Fatal(err)
	}
	defer nodes.Close()

	registry := prometheus.NewRegistry()
	exporter, err := promexporter.New(promexporter.WithRegisterer(registry), promexporter.WithoutScopeInfo(), promexporter.WithoutTargetInfo())
	if err != nil {
		log.Fatal(err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer provider.Shutdown(context.Background())
	obs, err := redlockotel.New(redlockotel.WithMeterProvider(provider))
	if err != nil {
		log.Fatal(err)
	}
	defer obs.Close()

	client, err := redlock.Dial(nodes.URLs(), redlock.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	m := client.NewMutex("nightly-report")
	ctx := context.Background()
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}

	server := httptest.NewServer(promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	defer server.Close()
	printLines(server.URL, "redlock_acquisitions_total", "redlock_holds_ended_total", "redlock_holds_active")
	// Output:
	// redlock_acquisitions_total{redlock_operation="Lock",redlock_outcome="acquired"} 1
	// redlock_holds_active 0
	// redlock_holds_ended_total{redlock_hold_end_reason="released",redlock_hold_lost="false"} 1
}

// printLines prints the lines of the page at url that begin with one of
// the prefixes, leaving out the comments.
func printLines(url string, prefixes ...string) {
	resp, err := http.Get(url)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		for _, p := range prefixes {
			if strings.HasPrefix(sc.Text(), p) {
				fmt.Println(sc.Text())
			}
		}
	}
}
