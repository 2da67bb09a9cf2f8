// Package interop proves that dbqueue and Laravel 8 share one queue: the
// tests run real PHP (the scripts in interop/php, on Debian's Laravel 8
// Illuminate packages) against the same database as dbqueue, on PostgreSQL,
// MariaDB/MySQL and SQLite.
//
// Without php or the Illuminate autoloaders the tests skip, saying what to
// install (.ci/install-php); with CI set they fail instead.
package interop

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/migrations"
	"github.com/dbqueue/dbqueue/worker"
)

// The PHP job names the tests use (interop/php/Jobs.php).
const (
	recorderClass   = `DbqInterop\Recorder`
	recorderHandle  = `DbqInterop\Recorder@handle`
	recorderFail    = `DbqInterop\Recorder@fail`
	recorderFlaky   = `DbqInterop\Recorder@flaky`
	recorderBrittle = `DbqInterop\Recorder@brittle`
	interopJob      = `DbqInterop\InteropJob`
)

// autoloaders are the Illuminate components bootstrap.php requires.
var autoloaders = []string{
	"/usr/share/php/Illuminate/Container/autoload.php",
	"/usr/share/php/Illuminate/Events/autoload.php",
	"/usr/share/php/Illuminate/Database/autoload.php",
	"/usr/share/php/Illuminate/Bus/autoload.php",
	"/usr/share/php/Illuminate/Queue/autoload.php",
}

// pdoDriver is the PDO driver (and DBQ_DRIVER) of each dialect.
var pdoDriver = map[dbqueue.Dialect]string{
	dbqueue.Postgres: "pgsql",
	dbqueue.MySQL:    "mysql",
	dbqueue.SQLite:   "sqlite",
}

var phpCheck struct {
	once    sync.Once
	root    string          // repository root, where `php interop/php/X.php` runs
	missing string          // why PHP cannot run, if it cannot
	drivers map[string]bool // PDO drivers PHP has
}

// requirePHP skips the test (fails it when CI is set) unless php, the
// Illuminate autoloaders and the dialect's PDO driver are installed.
func requirePHP(t testing.TB, d dbqueue.Dialect) {
	t.Helper()
	phpCheck.once.Do(func() {
		root, err := filepath.Abs("..")
		if err == nil {
			_, err = os.Stat(filepath.Join(root, "interop", "php", "bootstrap.php"))
		}
		if err != nil {
			phpCheck.missing = fmt.Sprintf("interop/php/bootstrap.php not found from %s: %v", root, err)
			return
		}
		phpCheck.root = root
		if _, err := exec.LookPath("php"); err != nil {
			phpCheck.missing = "php is not installed"
			return
		}
		var absent []string
		for _, f := range autoloaders {
			if _, err := os.Stat(f); err != nil {
				absent = append(absent, f)
			}
		}
		if len(absent) > 0 {
			phpCheck.missing = "the Illuminate autoloaders are missing: " + strings.Join(absent, ", ")
			return
		}
		out, err := exec.Command("php", "-r", `echo implode(",", PDO::getAvailableDrivers());`).Output()
		if err != nil {
			phpCheck.missing = fmt.Sprintf("php -r PDO::getAvailableDrivers(): %v", err)
			return
		}
		phpCheck.drivers = map[string]bool{}
		for _, d := range strings.Split(strings.TrimSpace(string(out)), ",") {
			phpCheck.drivers[d] = true
		}
	})
	reason := phpCheck.missing
	if reason == "" && !phpCheck.drivers[pdoDriver[d]] {
		reason = "php has no pdo_" + pdoDriver[d] + " driver"
	}
	if reason == "" {
		return
	}
	reason = "Laravel interop tests need PHP with Laravel 8's Illuminate packages: " + reason +
		" (run .ci/install-php)"
	if os.Getenv("CI") != "" {
		t.Fatal(reason)
	}
	t.Skip(reason)
}

// each is dbtest.Each for interop tests: one parallel subtest per dialect,
// skipped when PHP cannot run. The database is empty when empty is true
// (the test creates Laravel's tables), migrated by dbqueue otherwise.
func each(t *testing.T, empty bool, fn func(t *testing.T, s *side)) {
	t.Helper()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			requirePHP(t, d)
			var db *dbtest.DB
			if empty {
				db = dbtest.Empty(t, d)
			} else {
				db = dbtest.New(t, d)
			}
			fn(t, newSide(t, db))
		})
	}
}

// side is one test database as both languages see it.
type side struct {
	*dbtest.DB
	env []string // DBQ_* settings naming the database for PHP
}

func newSide(t testing.TB, db *dbtest.DB) *side {
	t.Helper()
	env := []string{"DBQ_DRIVER=" + pdoDriver[db.Dialect]}
	switch db.Dialect {
	case dbqueue.Postgres:
		u, err := url.Parse(db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		port := u.Port()
		if port == "" {
			port = "5432"
		}
		pass, _ := u.User.Password()
		env = append(env, "DBQ_HOST="+u.Hostname(), "DBQ_PORT="+port,
			"DBQ_USERNAME="+u.User.Username(), "DBQ_PASSWORD="+pass,
			"DBQ_DATABASE="+strings.TrimPrefix(u.Path, "/"),
			"DBQ_SCHEMA="+u.Query().Get("search_path"))
	case dbqueue.MySQL:
		parsed, err := dbqueue.ParseDSN(db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := mysql.ParseDSN(parsed.Conn)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Net != "tcp" {
			t.Fatalf("interop: MySQL test server must be reached over TCP for PHP, not %q", cfg.Net)
		}
		host, port, err := net.SplitHostPort(cfg.Addr)
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, "DBQ_HOST="+host, "DBQ_PORT="+port,
			"DBQ_USERNAME="+cfg.User, "DBQ_PASSWORD="+cfg.Passwd, "DBQ_DATABASE="+cfg.DBName)
	case dbqueue.SQLite:
		env = append(env, "DBQ_DATABASE="+strings.TrimPrefix(db.DSN, "sqlite:"))
	}
	return &side{DB: db, env: env}
}

// php returns a command running interop/php/<script> on this database, with
// extra DBQ_* settings; the caller's own DBQ_* variables are not passed on.
func (s *side) php(ctx context.Context, extraEnv []string, script string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "php", append([]string{filepath.Join("interop", "php", script)}, args...)...)
	cmd.Dir = phpCheck.root
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DBQ_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, s.env...), extraEnv...)
	return cmd
}

// runPHP runs a script to completion and returns its stdout; a non-zero
// exit fails the test with the script's output.
func (s *side) runPHP(t testing.TB, extraEnv []string, script string, args ...string) string {
	t.Helper()
	out, err := s.tryPHP(extraEnv, script, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tryPHP is runPHP for goroutines other than the test's: it returns the
// failure instead.
func (s *side) tryPHP(extraEnv []string, script string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := s.php(ctx, extraEnv, script, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("php %s %s: %v\nstdout:\n%s\nstderr:\n%s", script, strings.Join(args, " "), err, tail(stdout.String()), tail(stderr.String()))
	}
	return stdout.String(), nil
}

// tail keeps the end of long output for a failure message.
func tail(s string) string {
	const most = 4000
	if len(s) <= most {
		return s
	}
	return "…" + s[len(s)-most:]
}

// laravelTables creates jobs and failed_jobs as Laravel 8's migration stubs
// do (plus the interop_runs ledger), then runs dbqueue's migrations on them.
func (s *side) laravelTables(t testing.TB) {
	t.Helper()
	s.runPHP(t, nil, "schema.php")
	if err := migrations.Up(context.Background(), s.SQL, s.Dialect); err != nil {
		t.Fatalf("migrations.Up on Laravel's tables: %v", err)
	}
}

// ensureLedger creates interop_runs as bootstrap.php's ensure_ledger does.
func (s *side) ensureLedger(t testing.TB) {
	t.Helper()
	s.Exec(t, "CREATE TABLE IF NOT EXISTS interop_runs (job_key varchar(191) NOT NULL, runner varchar(16) NOT NULL)")
}

// record is what the Go handlers do: one ledger row per run.
func (s *side) record(ctx context.Context, key string) error {
	if key == "" {
		return errors.New("interop: job data has no \"key\"")
	}
	_, err := s.SQL.ExecContext(ctx, s.Dialect.Rebind("INSERT INTO interop_runs (job_key, runner) VALUES (?, 'go')"), key)
	return err
}

// runs reads the ledger: job key → the runners that ran it, in any order.
func (s *side) runs(t testing.TB) map[string][]string {
	t.Helper()
	rows, err := s.SQL.Query("SELECT job_key, runner FROM interop_runs")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var key, runner string
		if err := rows.Scan(&key, &runner); err != nil {
			t.Fatal(err)
		}
		out[key] = append(out[key], runner)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// jobRow is a jobs row as the tests inspect it.
type jobRow struct {
	ID          int64
	Attempts    int
	Reserved    bool
	AvailableAt int64
	CreatedAt   int64
	Key         string // payload data.key, or the key in an object job's command
	UUID        string
	Job         string
}

func (s *side) jobRows(t testing.TB) []jobRow {
	t.Helper()
	rows, err := s.SQL.Query("SELECT id, attempts, reserved_at, available_at, created_at, payload FROM jobs ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []jobRow
	for rows.Next() {
		var (
			r        jobRow
			reserved sql.NullInt64
			payload  []byte
		)
		if err := rows.Scan(&r.ID, &r.Attempts, &reserved, &r.AvailableAt, &r.CreatedAt, &payload); err != nil {
			t.Fatal(err)
		}
		r.Reserved = reserved.Valid
		p, err := dbqueue.DecodePayload(payload)
		if err != nil {
			t.Fatalf("jobs row %d: %v", r.ID, err)
		}
		r.UUID, r.Job, r.Key = p.UUID, p.Name(), payloadKey(p)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// payloadKey is the ledger key of a job: data.key of a string job, the key
// property of an InteropJob's serialized command.
func payloadKey(p dbqueue.Payload) string {
	var data struct {
		Key     string `json:"key"`
		Command string `json:"command"`
	}
	_ = json.Unmarshal(p.Data, &data)
	if data.Command != "" {
		key, _ := phpStringProp(data.Command, "key")
		return key
	}
	return data.Key
}

// failedRow is a failed_jobs row as the tests inspect it.
type failedRow struct {
	UUID, Connection, Queue, Exception, Key, Job string
}

func (s *side) failedRows(t testing.TB) map[string]failedRow {
	t.Helper()
	rows, err := s.SQL.Query("SELECT uuid, connection, queue, exception, payload FROM failed_jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]failedRow{}
	for rows.Next() {
		var (
			r       failedRow
			payload []byte
		)
		if err := rows.Scan(&r.UUID, &r.Connection, &r.Queue, &r.Exception, &payload); err != nil {
			t.Fatal(err)
		}
		p, err := dbqueue.DecodePayload(payload)
		if err != nil {
			t.Fatalf("failed_jobs %s: %v", r.UUID, err)
		}
		if p.UUID != r.UUID {
			t.Errorf("failed_jobs uuid %s holds a payload with uuid %s", r.UUID, p.UUID)
		}
		r.Key, r.Job = payloadKey(p), p.Name()
		out[r.Key] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// phpFailedList is `php failed.php list`: the uuids Laravel's failer sees.
func (s *side) phpFailedList(t testing.TB) []phpFailed {
	t.Helper()
	var list []phpFailed
	if err := json.Unmarshal([]byte(s.runPHP(t, nil, "failed.php", "list")), &list); err != nil {
		t.Fatalf("failed.php list: %v", err)
	}
	return list
}

type phpFailed struct {
	UUID       string `json:"uuid"`
	Connection string `json:"connection"`
	Queue      string `json:"queue"`
	Exception  string `json:"exception"`
}

// pushPHP runs push.php and returns the new job ids it printed.
func (s *side) pushPHP(t testing.TB, args ...string) []int64 {
	t.Helper()
	var ids []int64
	for _, f := range strings.Fields(s.runPHP(t, nil, "push.php", args...)) {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("push.php %v printed %q, not a job id", args, f)
		}
		ids = append(ids, id)
	}
	return ids
}

// phpWorker is a running `php work.php` process.
type phpWorker struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	done   chan struct{}
	err    error
	cancel context.CancelFunc
}

// startPHPWorker starts Laravel's worker with the given options and stops it
// (if still running) when the test ends.
func (s *side) startPHPWorker(t testing.TB, extraEnv []string, args ...string) *phpWorker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := s.php(ctx, extraEnv, "work.php", args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second // then it is killed
	w := &phpWorker{cmd: cmd, out: &syncBuffer{}, done: make(chan struct{}), cancel: cancel}
	cmd.Stdout, cmd.Stderr = w.out, w.out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start php work.php: %v", err)
	}
	go func() {
		w.err = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

// stop asks the worker to quit (SIGTERM, which Laravel's worker handles
// between jobs) and waits for it; it returns an error unless the worker
// exited with status 0.
func (w *phpWorker) stop() error {
	w.cancel()
	<-w.done
	if errors.Is(w.err, context.Canceled) && w.cmd.ProcessState != nil && w.cmd.ProcessState.Success() {
		return nil // exec reports the cancellation we asked for
	}
	return w.err
}

// wait waits for the worker to stop by itself (--stop-when-empty,
// --max-time) and fails the test if it exits with an error.
func (w *phpWorker) wait(t testing.TB) {
	t.Helper()
	<-w.done
	w.cancel()
	if w.err != nil {
		t.Fatalf("php work.php: %v\n%s", w.err, tail(w.out.String()))
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// goWorker is an in-process dbqueue worker running until stopped.
type goWorker struct {
	cancel context.CancelFunc
	done   chan error
}

// startGoWorker runs w in a goroutine; the test ends by stopping it.
func startGoWorker(t testing.TB, w *worker.Worker) *goWorker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := &goWorker{cancel: cancel, done: make(chan error, 1)}
	go func() { g.done <- w.Run(ctx) }()
	t.Cleanup(func() { g.cancel(); <-g.done })
	return g
}

// stop cancels the worker and returns Run's error.
func (g *goWorker) stop() error {
	g.cancel()
	err := <-g.done
	g.done <- err // for the cleanup
	return err
}

// wait waits for the worker to stop by itself and returns Run's error.
func (g *goWorker) wait() error {
	err := <-g.done
	g.done <- err
	return err
}

// quietLogger keeps worker logs out of the test output except errors.
func quietLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelError}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// eventually polls cond until it holds or the time is up, then fails the
// test with the message msg returns.
func eventually(t testing.TB, within time.Duration, cond func() bool, msg func() string) {
	t.Helper()
	if !dbtest.Until(within, cond) {
		t.Fatalf("after %v: %s", within, msg())
	}
}

// phpStringProp reads a string property from a PHP-serialized object, as
// Laravel writes an object job's data.command: …s:3:"key";s:5:"value";…
func phpStringProp(serialized, name string) (string, bool) {
	marker := fmt.Sprintf(`s:%d:"%s";s:`, len(name), name)
	i := strings.Index(serialized, marker)
	if i < 0 {
		return "", false
	}
	rest := serialized[i+len(marker):]
	colon := strings.IndexByte(rest, ':')
	if colon < 0 {
		return "", false
	}
	n, err := strconv.Atoi(rest[:colon])
	if err != nil || len(rest) < colon+2+n || rest[colon+1] != '"' {
		return "", false
	}
	return rest[colon+2 : colon+2+n], true
}

// phpBoolProp reads a bool property: …s:11:"shouldThrow";b:1;…
func phpBoolProp(serialized, name string) (value, ok bool) {
	m := regexp.MustCompile(regexp.QuoteMeta(fmt.Sprintf(`s:%d:"%s";b:`, len(name), name)) + `([01]);`).FindStringSubmatch(serialized)
	if m == nil {
		return false, false
	}
	return m[1] == "1", true
}

// sortedKeys lists a map's keys in order, for messages.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
