//go:build linux

package dbtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The binaries a Patroni cluster needs (Debian's patroni and etcd-server
// packages, installed by .ci/install-patroni); variables so a machine with
// other paths can say so.
var (
	PatroniBin = envOr("DBQUEUE_TEST_PATRONI", "/usr/bin/patroni")
	EtcdBin    = envOr("DBQUEUE_TEST_ETCD", "/usr/bin/etcd")
)

// PatroniSettings are the settings of Patroni's dynamic configuration
// (bootstrap.dcs) that decide how fast and how safely it fails over. The
// fields carry Patroni's own names; PatroniDefaults says which values the
// tests use and why.
type PatroniSettings struct {
	// TTL is the leader key's lease in etcd, in seconds: a leader whose
	// Patroni stops renewing it (the process died, the host is cut off) is
	// replaced once it lapses. Patroni's default is 30.
	TTL int
	// LoopWait is how often, in seconds, each Patroni runs its HA loop:
	// renews the lease, checks its PostgreSQL, races for a free leader key.
	// Patroni's default is 10.
	LoopWait int
	// RetryTimeout bounds, in seconds, Patroni's retries of etcd and
	// PostgreSQL operations; a leader that cannot renew its lease within it
	// demotes itself. Patroni asks for LoopWait + 2×RetryTimeout ≤ TTL.
	// Patroni's default is 10.
	RetryTimeout int
	// MaximumLagOnFailover is how many bytes of WAL a replica may trail and
	// still be promoted (Patroni's default 1 MiB). In synchronous mode only
	// the synchronous standby is a candidate, and it has every commit the
	// leader acknowledged.
	MaximumLagOnFailover int
	// PrimaryStartTimeout is how long, in seconds, Patroni tries to restart
	// a crashed leader's PostgreSQL in place before failing over (Patroni's
	// default 300); 0 fails over at once when a healthy replica can take
	// over.
	PrimaryStartTimeout int
	// SynchronousMode makes the leader name a synchronous standby
	// (synchronous_standby_names) and lets only that standby be promoted:
	// no commit the leader acknowledged is lost.
	SynchronousMode bool
	// SynchronousModeStrict stops the leader acknowledging commits when no
	// synchronous standby is left, rather than falling back to
	// asynchronous replication.
	SynchronousModeStrict bool
}

// PatroniDefaults are the settings the failover tests use: a lease of 10s,
// a loop every second and 4s of retries (1 + 2×4 ≤ 10, Patroni's rule),
// so a lost leader is replaced in about 10s instead of Patroni's ~30s,
// while a loaded machine's slow etcd write (the CI machine's two cores run
// the whole test suite beside it) does not make a healthy leader demote
// itself; 1 MiB of allowed lag (Patroni's default, moot in synchronous
// mode); a crashed leader's PostgreSQL fails over at once instead of
// restarting in place; synchronous mode, not strict (three members leave a
// synchronous standby after one is lost).
func PatroniDefaults() PatroniSettings {
	return PatroniSettings{
		TTL: 10, LoopWait: 1, RetryTimeout: 4,
		MaximumLagOnFailover: 1 << 20,
		PrimaryStartTimeout:  0,
		SynchronousMode:      true,
	}
}

// Patroni is a private PostgreSQL cluster managed by Patroni: three etcd
// members as its store, and Patroni members each running a PostgreSQL on
// its own loopback port, data directory and REST API port. The test kills
// members' processes and watches Patroni elect a new leader. Every process
// is killed and every directory removed when the test ends.
type Patroni struct {
	Members  []*PatroniMember
	Settings PatroniSettings
	// DSN names every member's PostgreSQL with
	// target_session_attrs=read-write, as a dbqueue user's DSN does: pgx
	// keeps the first host that accepts writes. It names no test database
	// (see NewOnPatroni).
	DSN string

	t    testing.TB
	dir  string
	etcd []*process
}

// PatroniMember is one Patroni and the PostgreSQL it runs.
type PatroniMember struct {
	Name string
	// API is the base URL of the member's Patroni REST API.
	API string

	dir     string
	patroni *process
}

// process is a child process whose output goes to a log file.
type process struct {
	name   string
	cmd    *osexec.Cmd
	log    string
	exited chan struct{}
}

// kill sends SIGKILL and waits (bounded) for the process to be reaped.
func (p *process) kill() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGKILL %s: %w", p.name, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit within 10s of SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// StartPatroni starts three etcd members and n Patroni members (2 or 3)
// with settings s, and returns once one member leads with PostgreSQL
// running, every other member streams from it and, in synchronous mode,
// one of them is the synchronous standby. Missing binaries skip the test,
// or fail it under CI.
func StartPatroni(t testing.TB, n int, s PatroniSettings) *Patroni {
	t.Helper()
	if n < 2 || n > 3 {
		t.Fatalf("StartPatroni: %d members: want 2 or 3", n)
	}
	for _, bin := range []string{PatroniBin, EtcdBin, filepath.Join(PostgresBin, "initdb")} {
		if _, err := os.Stat(bin); err != nil {
			missing(t, fmt.Sprintf("no %s for a private Patroni cluster: %v (run .ci/install-patroni)", filepath.Base(bin), err))
		}
	}
	// Patroni, and so its PostgreSQL, runs as the postgres OS user.
	cred := postgresUser(t, "PostgreSQL refuses to run as root")
	dir, err := os.MkdirTemp("", "dbqueue-patroni-")
	if err != nil {
		t.Fatal(err)
	}
	// Traversable by the postgres OS user; each member's own directory
	// is its alone.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &Patroni{Settings: s, t: t, dir: dir}
	// Registered first, so it runs last: after every process is gone.
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	t.Cleanup(p.stop)

	// etcd: three members, so the store itself survives the loss of one.
	clients := make([]string, 3)
	peers := make([]string, 3)
	for i := range 3 {
		clients[i] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		peers[i] = fmt.Sprintf("e%d=http://127.0.0.1:%d", i, freePort(t))
	}
	token := "dbqueue-" + randomName()
	for i := range 3 {
		name, peer, _ := strings.Cut(peers[i], "=")
		p.etcd = append(p.etcd, p.spawn(name, dir, nil, nil, EtcdBin,
			"--name", name, "--data-dir", filepath.Join(dir, name),
			"--listen-client-urls", "http://"+clients[i], "--advertise-client-urls", "http://"+clients[i],
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(peers, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", token, "--logger", "zap", "--log-level", "warn"))
	}
	p.poll(60*time.Second, "etcd to elect a leader", func(ctx context.Context) (bool, error) {
		var h struct {
			Health string `json:"health"`
		}
		for _, c := range clients {
			if err := getJSON(ctx, "http://"+c+"/health", &h); err != nil || h.Health != "true" {
				return false, err
			}
		}
		return true, nil
	})

	// Patroni members. The first to start takes the initialize key and
	// runs initdb; the others clone it with pg_basebackup.
	hosts := make([]string, n)
	for i := range n {
		m := &PatroniMember{Name: fmt.Sprintf("pg%d", i), dir: filepath.Join(dir, fmt.Sprintf("pg%d", i))}
		if err := os.Mkdir(m.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if cred != nil {
			if err := os.Chown(m.dir, int(cred.Uid), int(cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
		pgPort, apiPort := freePort(t), freePort(t)
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", pgPort)
		m.API = fmt.Sprintf("http://127.0.0.1:%d", apiPort)
		conf := patroniConfig(m, s, clients, pgPort, apiPort, token)
		b, err := json.MarshalIndent(conf, "", "  ") // JSON is YAML
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(m.dir, "patroni.yml")
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		env := []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + m.dir}
		m.patroni = p.spawn(m.Name, m.dir, cred, env, PatroniBin, file)
		p.Members = append(p.Members, m)
	}
	p.DSN = "postgres://postgres@" + strings.Join(hosts, ",") + "/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2"

	p.poll(120*time.Second, "a leader and every replica streaming", func(ctx context.Context) (bool, error) {
		if err := p.exited(); err != nil {
			p.t.Fatalf("%v while the cluster started\n%s", err, p.Logs())
		}
		c, err := p.Cluster(ctx)
		if err != nil {
			return false, err
		}
		leaders, sync := 0, 0
		for _, m := range c.Members {
			if m.State != "running" {
				return false, nil
			}
			switch m.Role {
			case "leader":
				leaders++
			case "sync_standby":
				sync++
			}
		}
		if len(c.Members) != n || leaders != 1 || (s.SynchronousMode && sync != 1) {
			return false, nil
		}
		// Each member's own view: GET /health is 200 while its
		// PostgreSQL runs.
		for _, m := range p.Members {
			if code, err := get(ctx, m.API+"/health", &struct{}{}); err != nil || code != http.StatusOK {
				return false, err
			}
		}
		return true, nil
	})
	return p
}

// patroniConfig is member m's Patroni configuration.
func patroniConfig(m *PatroniMember, s PatroniSettings, etcd []string, pgPort, apiPort int, token string) map[string]any {
	api := fmt.Sprintf("127.0.0.1:%d", apiPort)
	pg := fmt.Sprintf("127.0.0.1:%d", pgPort)
	return map[string]any{
		"scope":     "dbqueue",
		"namespace": "/" + token + "/",
		"name":      m.Name,
		"log":       map[string]any{"level": "INFO"},
		"restapi":   map[string]any{"listen": api, "connect_address": api},
		"etcd3":     map[string]any{"hosts": etcd},
		"bootstrap": map[string]any{
			"dcs": map[string]any{
				"ttl":                     s.TTL,
				"loop_wait":               s.LoopWait,
				"retry_timeout":           s.RetryTimeout,
				"maximum_lag_on_failover": s.MaximumLagOnFailover,
				"primary_start_timeout":   s.PrimaryStartTimeout,
				"synchronous_mode":        s.SynchronousMode,
				"synchronous_mode_strict": s.SynchronousModeStrict,
				"postgresql": map[string]any{
					// A crashed leader's WAL may run past what the new
					// leader has (commits it wrote but never acknowledged):
					// pg_rewind lets it rejoin as a replica.
					"use_pg_rewind": true,
					"use_slots":     true,
					"parameters":    map[string]any{"max_connections": 200},
				},
			},
			"initdb": []any{map[string]any{"encoding": "UTF8"}, map[string]any{"auth": "trust"}},
		},
		"postgresql": map[string]any{
			"listen":          pg,
			"connect_address": pg,
			"data_dir":        filepath.Join(m.dir, "data"),
			"bin_dir":         PostgresBin,
			"pgpass":          filepath.Join(m.dir, "pgpass"),
			"authentication": map[string]any{
				"superuser":   map[string]any{"username": "postgres"},
				"replication": map[string]any{"username": "postgres"},
				"rewind":      map[string]any{"username": "postgres"},
			},
			"parameters": map[string]any{
				"unix_socket_directories": m.dir,
				// The test kills processes, not the machine: what a
				// commit wrote reaches the kernel either way.
				"fsync": "off",
			},
			"pg_hba": []string{
				"local all all trust",
				"host all all 127.0.0.1/32 trust",
				"host replication all 127.0.0.1/32 trust",
			},
		},
		// No watchdog: softdog would reset this shared machine. See
		// PatroniMember.KillPatroni.
		"watchdog": map[string]any{"mode": "off"},
	}
}

// spawn starts a child process in dir, as cred when set, its output to a
// log in the cluster's directory, killed if the test process dies. dir is
// one the child's user can enter: Patroni's Python children change to the
// working directory they inherit, and the test's may be one the postgres
// user cannot enter (a clone in a fresh mktemp -d, a home directory of
// mode 0700); they died there with "Permission denied", and the cluster
// never bootstrapped.
func (p *Patroni) spawn(name, dir string, cred *syscall.Credential, env []string, bin string, args ...string) *process {
	p.t.Helper()
	log := filepath.Join(p.dir, name+".log")
	f, err := os.Create(log)
	if err != nil {
		p.t.Fatal(err)
	}
	cmd := osexec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr, cmd.Env = f, f, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := cmd.Start(); err != nil {
		f.Close()
		p.t.Fatalf("start %s: %v", name, err)
	}
	pr := &process{name: name, cmd: cmd, log: log, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(pr.exited)
	}()
	return pr
}

// stop kills every Patroni, every PostgreSQL (Patroni starts PostgreSQL
// in a session of its own, so it outlives a killed Patroni) and every
// etcd member.
func (p *Patroni) stop() {
	for _, m := range p.Members {
		if err := m.patroni.kill(); err != nil {
			p.t.Errorf("cleanup: %v", err)
		}
	}
	for _, m := range p.Members {
		if err := m.killPostgres(); err != nil && !errors.Is(err, errNotRunning) {
			p.t.Errorf("cleanup: %v", err)
		}
	}
	for _, e := range p.etcd {
		if err := e.kill(); err != nil {
			p.t.Errorf("cleanup: %v", err)
		}
	}
	if err := sweep(p.dir); err != nil {
		p.t.Errorf("cleanup: %v", err)
	}
}

// sweep SIGKILLs every process whose command line names dir, this
// cluster's own temporary directory: what Patroni ran that outlived it
// (pg_rewind, pg_basebackup, a single-user postgres, a postmaster it
// was starting as it was killed). It returns once they are gone, or an
// error after 10s.
func sweep(dir string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		var left []int
		for _, f := range procs {
			b, err := os.ReadFile(f)
			if err != nil || !strings.Contains(string(b), dir+"/") {
				continue
			}
			pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			if err != nil || pid == os.Getpid() || !alive(pid) {
				continue
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
			left = append(left, pid)
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v in %s live 10s after SIGKILL", left, dir)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exited says which Patroni or etcd process has exited, if any.
func (p *Patroni) exited() error {
	procs := slices.Clone(p.etcd)
	for _, m := range p.Members {
		procs = append(procs, m.patroni)
	}
	for _, pr := range procs {
		select {
		case <-pr.exited:
			return fmt.Errorf("%s exited: %v", pr.name, pr.cmd.ProcessState)
		default:
		}
	}
	return nil
}

// PatroniCluster is Patroni's GET /cluster: the members as the store sees
// them.
type PatroniCluster struct {
	Members []struct {
		Name     string `json:"name"`
		Role     string `json:"role"`  // leader, sync_standby, replica
		State    string `json:"state"` // running, starting, stopped, crashed…
		Timeline int    `json:"timeline"`
		Lag      any    `json:"lag"` // bytes, or "unknown"
	} `json:"members"`
}

// Cluster asks the members' REST APIs in turn for GET /cluster and returns
// the first answer.
func (p *Patroni) Cluster(ctx context.Context) (PatroniCluster, error) {
	var c PatroniCluster
	var errs []error
	for _, m := range p.Members {
		err := getJSON(ctx, m.API+"/cluster", &c)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// Primary asks each member's REST API GET /primary, which answers 200
// only on the member that holds the leader key, and returns that member
// once its PostgreSQL also reports itself running as primary; nil if none
// does.
func (p *Patroni) Primary(ctx context.Context) (*PatroniMember, error) {
	var errs []error
	for _, m := range p.Members {
		var st struct {
			State string `json:"state"`
			Role  string `json:"role"`
		}
		code, err := get(ctx, m.API+"/primary", &st)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if code == http.StatusOK && st.State == "running" && (st.Role == "master" || st.Role == "primary") {
			return m, nil
		}
	}
	return nil, errors.Join(errs...)
}

// AwaitPrimary polls Primary every 20ms until a member other than old
// (nil: any member) leads with PostgreSQL running, and returns it; it fails
// the test after limit.
func (p *Patroni) AwaitPrimary(limit time.Duration, old *PatroniMember) *PatroniMember {
	p.t.Helper()
	var found *PatroniMember
	p.poll(limit, "a new primary", func(ctx context.Context) (bool, error) {
		m, err := p.Primary(ctx)
		if m != nil && m != old {
			found = m
			return true, nil
		}
		return false, err
	})
	return found
}

// KillPostgres SIGKILLs the member's PostgreSQL: the postmaster and every
// backend (its process group), as the OOM killer or a crash of the server
// does, leaving Patroni running, and returns once the postmaster is gone.
func (m *PatroniMember) KillPostgres() error { return m.killPostgres() }

var errNotRunning = errors.New("PostgreSQL is not running")

func (m *PatroniMember) killPostgres() error {
	pid, err := m.postmaster()
	if err != nil {
		return err
	}
	// Patroni starts the postmaster from a helper that calls setsid: the
	// postmaster and every backend it forks share a process group of
	// their own.
	pgid, err := syscall.Getpgid(pid)
	if errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s: %w (stale postmaster.pid %d)", m.Name, errNotRunning, pid)
	}
	if err != nil {
		return fmt.Errorf("%s: process group of the postmaster %d: %w", m.Name, pid, err)
	}
	target := -pgid
	if pgid <= 1 || pgid == syscall.Getpgrp() {
		// Not a server Patroni started (a single-user postgres it runs
		// for crash recovery before pg_rewind is in this test's own
		// group): that process alone.
		target = pid
	}
	if err := syscall.Kill(target, syscall.SIGKILL); err != nil {
		return fmt.Errorf("%s: SIGKILL to PostgreSQL (%d): %w", m.Name, target, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: the postmaster %d lives 10s after SIGKILL", m.Name, pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// PostgresRunning says whether the member's postmaster is alive.
func (m *PatroniMember) PostgresRunning() bool {
	_, err := m.postmaster()
	return err == nil
}

// postmaster returns the pid of the member's running postmaster, from its
// pid file. A stale pid file may name a pid since reused by another
// process: only one whose command line names this member's directory is
// ours.
func (m *PatroniMember) postmaster() (int, error) {
	b, err := os.ReadFile(filepath.Join(m.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("%s: %w: %v", m.Name, errNotRunning, err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, fmt.Errorf("%s: postmaster.pid: %w", m.Name, err)
	}
	if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err != nil || !strings.Contains(string(cmd), m.dir+"/") || !alive(pid) {
		return 0, fmt.Errorf("%s: %w (postmaster.pid names %d, not a server in %s)", m.Name, errNotRunning, pid, m.dir)
	}
	return pid, nil
}

// alive says whether process pid runs. A killed postmaster is nobody's
// child here (Patroni's helper that started it has exited), so it stays a
// zombie until init reaps it, which may take a second: a zombie counts as
// dead.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state …: comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// KillPatroni SIGKILLs the member's Patroni and waits for it to exit. Its
// PostgreSQL keeps running, as primary if it led: Patroni starts it in a
// session of its own, and nothing stops it until the leader key lapses
// and another member is promoted — then two primaries run. Patroni's
// answer is the watchdog (/dev/watchdog, which resets the host ttl minus
// safety_margin after Patroni's last keepalive); a test that cannot reset
// the shared machine kills the PostgreSQL itself at that moment
// (KillPostgres).
func (m *PatroniMember) KillPatroni() error { return m.patroni.kill() }

// Logs returns the logs of every Patroni and etcd member, for failure
// reports.
func (p *Patroni) Logs() string {
	var b strings.Builder
	for _, m := range p.Members {
		fmt.Fprintf(&b, "--- %s\n%s", m.patroni.name, tailLines(m.patroni.log, 60))
		// Patroni's PostgreSQL logs to its data directory's log folder.
		logs, _ := filepath.Glob(filepath.Join(m.dir, "data", "log", "*"))
		for _, l := range logs {
			fmt.Fprintf(&b, "--- %s PostgreSQL %s\n%s", m.Name, filepath.Base(l), tailLines(l, 30))
		}
	}
	for _, e := range p.etcd {
		fmt.Fprintf(&b, "--- %s\n%s", e.name, tailLines(e.log, 20))
	}
	return b.String()
}

// tailLines returns a file's last n lines.
func tailLines(file string, n int) string {
	b, _ := os.ReadFile(file)
	lines := strings.SplitAfter(string(b), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

// poll is pollFor with the cluster's logs.
func (p *Patroni) poll(limit time.Duration, what string, done func(ctx context.Context) (bool, error)) {
	p.t.Helper()
	pollFor(p.t, limit, what, done, p.Logs)
}

var restClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// get GETs url and decodes a JSON body into v, whatever the status.
func get(ctx context.Context, url string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := restClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, v); err != nil {
			return resp.StatusCode, fmt.Errorf("GET %s: %w", url, err)
		}
	}
	return resp.StatusCode, nil
}

// getJSON GETs url and decodes it into v, requiring 200.
func getJSON(ctx context.Context, url string, v any) error {
	code, err := get(ctx, url, v)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET %s: %d", url, code)
	}
	return err
}

// NewOnPatroni is NewOn for a Patroni cluster: a fresh, migrated schema
// made on the leader and streamed to the replicas, and a DSN naming every
// member (see Patroni.DSN), so the DB's handles follow a failover.
func NewOnPatroni(t testing.TB, p *Patroni) *DB {
	t.Helper()
	return newOnMultiHost(t, p.DSN)
}
