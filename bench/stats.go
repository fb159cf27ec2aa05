package main

import (
	"errors"
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
		if pid := cl.PID(i); pid != 0 {
			total += procCPU(pid)
		}
	}
	return total
}

// procCPU is the CPU time (user+system) process pid has used so far, from
// /proc/PID/stat (clock ticks of 10 ms); 0 when it cannot be read.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	// Fields after the command name, which is in parentheses.
	if j := strings.LastIndexByte(s, ')'); j >= 0 {
		s = s[j+2:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// machineTicks is the machine's CPU time, every process and CPU, in clock
// ticks of /proc/stat: busy (neither idle nor waiting for I/O) and in all.
type machineTicks struct{ busy, total int64 }

// readMachineTicks reads the first line of /proc/stat; zero when it cannot.
func readMachineTicks() machineTicks {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineTicks{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return machineTicks{}
	}
	var m machineTicks
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i >= 8 { // guest time is already counted in user time
			break
		}
		m.total += n
		if i != 3 && i != 4 { // idle, iowait
			m.busy += n
		}
	}
	return m
}

// add counts the ticks from a to b.
func (m *machineTicks) add(a, b machineTicks) {
	m.busy += b.busy - a.busy
	m.total += b.total - a.total
}

// share is the busy part of the ticks counted; NaN when none were.
func (m *machineTicks) share() float64 {
	if m.total <= 0 {
		return math.NaN()
	}
	return float64(m.busy) / float64(m.total)
}

// clusterPIDs is the process id of every redis-server process of cl: each
// node's, or each shard's of each member, as the server reports it.
func clusterPIDs(cl *redlocktest.Cluster) ([]int, error) {
	var pids []int
	for i := 0; i < cl.N(); i++ {
		if cl.Shards() == 0 {
			pids = append(pids, cl.PID(i))
			continue
		}
		for s := range cl.Shards() {
			info, err := redis.String(cl.DoShard(i, s, "INFO", "server"))
			if err != nil {
				return nil, err
			}
			pid, err := infoField(info, "process_id")
			if err != nil {
				return nil, fmt.Errorf("member %d shard %d: %w", i, s, err)
			}
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// infoField is the integer field name of an INFO reply.
func infoField(info, name string) (int, error) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO has no " + name)
}

// serverSnap is what a contender's redis-server processes have done so
// far.
type serverSnap struct {
	cpu   time.Duration
	reads int64 // reads from client connections (INFO stats total_reads_processed); 0 when not read
	calls int64 // script calls, EVALSHA and EVAL (INFO commandstats); 0 when not read
}

func (a serverSnap) sub(b serverSnap) serverSnap {
	return serverSnap{a.cpu - b.cpu, a.reads - b.reads, a.calls - b.calls}
}

// readServers is what the processes of cl (pids, from clusterPIDs) have
// done so far; a process that does not answer INFO counts its CPU only,
// and a nil cl counts only the CPU of pids.
func readServers(cl *redlocktest.Cluster, pids []int) serverSnap {
	var s serverSnap
	for _, pid := range pids {
		s.cpu += procCPU(pid)
	}
	for i := 0; cl != nil && i < cl.N(); i++ {
		for sh := range max(cl.Shards(), 1) {
			st, err := processStats(cl, i, sh)
			if err == nil {
				s.reads += st.reads
				s.calls += st.calls
			}
		}
	}
	return s
}

// processStats reads the reads and script calls of shard sh of member i
// of cl (of node i when cl has no shards).
func processStats(cl *redlocktest.Cluster, i, sh int) (serverSnap, error) {
	var reply any
	var err error
	if cl.Shards() == 0 {
		reply, err = cl.Do(i, "INFO", "stats", "commandstats")
	} else {
		reply, err = cl.DoShard(i, sh, "INFO", "stats", "commandstats")
	}
	text, err := redis.String(reply, err)
	if err != nil {
		return serverSnap{}, err
	}
	reads, err := infoField(text, "total_reads_processed")
	st := parseCommandStats(text)
	return serverSnap{reads: int64(reads), calls: st["evalsha"].calls + st["eval"].calls}, err
}
