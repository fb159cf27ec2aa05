package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/redlock-go/redlock/redlocktest"
)

// pct returns the p-th percentile (0..100) of sorted durations, nearest rank.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

func sortDur(d []time.Duration) []time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// cpuTime is the process's user+system CPU time so far (getrusage).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// memSnap is the allocation counters of the Go runtime.
type memSnap struct{ mallocs, bytes uint64 }

func readMem() memSnap {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSnap{ms.Mallocs, ms.TotalAlloc}
}

// cmdStat is one line of INFO commandstats.
type cmdStat struct{ calls, usec int64 }

// commandStats reads INFO commandstats of node i: "evalsha" -> calls, usec.
func commandStats(c *redlocktest.Cluster, i int) (map[string]cmdStat, error) {
	s, err := redis.String(c.Do(i, "INFO", "commandstats"))
	if err != nil {
		return nil, err
	}
	return parseCommandStats(s), nil
}

// parseCommandStats reads the text of INFO commandstats.
func parseCommandStats(s string) map[string]cmdStat {
	out := map[string]cmdStat{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st cmdStat
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				st.calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out
}

// allCommandStats reads every node's commandstats.
func allCommandStats(c *redlocktest.Cluster) []map[string]cmdStat {
	out := make([]map[string]cmdStat, c.N())
	for i := range out {
		m, err := commandStats(c, i)
		if err == nil {
			out[i] = m
		}
	}
	return out
}

// diffStats is after - before for one command on every node.
func diffStats(before, after []map[string]cmdStat, cmd string) []cmdStat {
	out := make([]cmdStat, len(before))
	for i := range before {
		out[i] = cmdStat{after[i][cmd].calls - before[i][cmd].calls, after[i][cmd].usec - before[i][cmd].usec}
	}
	return out
}

// fmtDur formats a duration compactly for tables: 183µs, 1.21ms, 40.3ms, 2.05s.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func fmtRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "–"
	}
	if r >= 100 {
		return fmt.Sprintf("%.0f×", r)
	}
	if r >= 10 {
		return fmt.Sprintf("%.1f×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

func fmtNum(x float64) string {
	switch {
	case math.IsNaN(x):
		return "–"
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

// serverCPU is the CPU time (user+system) the cluster's redis-server
// processes have used so far, from /proc/PID/stat (clock ticks of 10 ms).
func serverCPU(cl *redlocktest.Cluster) time.Duration {
	var total time.Duration
	for i := 0; i < cl.N(); i++ {
		pid := cl.PID(i)
		if pid == 0 {
			continue
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		// Fields after the command name, which is in parentheses.
		if j := strings.LastIndexByte(s, ')'); j >= 0 {
			s = s[j+2:]
		}
		f := strings.Fields(s)
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(ut+st) * 10 * time.Millisecond
	}
	return total
}
