package dbqueue_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqmysql"
	"github.com/dbqueue/dbqueue/driver/dbqpgx"
	"github.com/dbqueue/dbqueue/driver/dbqsqlite"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// wantErr fails unless err is an error whose text holds every part of want.
func wantErr(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want one saying %q", what, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not say %q", what, err, w)
		}
	}
}

func TestPushRejectsBadJobs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		for _, tc := range []struct {
			what string
			job  dbqueue.NewJob
			want []string
		}{
			{"empty name", dbqueue.NewJob{}, []string{"NewJob.Name is empty", "name the handler"}},
			{"blank name", dbqueue.NewJob{Name: " \t"}, []string{"NewJob.Name is empty"}},
			{"256-byte queue name", dbqueue.NewJob{Name: "x", Queue: strings.Repeat("q", 256)}, []string{"256 bytes", "255", "use a shorter name"}},
			{"chan data", dbqueue.NewJob{Name: "x", Data: make(chan int)}, []string{`job "x"`, "not JSON-encodable", "chan int"}},
			{"func data", dbqueue.NewJob{Name: "x", Data: func() {}}, []string{"not JSON-encodable", "func()"}},
			{"func in a struct", dbqueue.NewJob{Name: "x", Data: struct{ F func() }{}}, []string{"not JSON-encodable"}},
			{"NaN data", dbqueue.NewJob{Name: "x", Data: math.NaN()}, []string{"not JSON-encodable", "NaN"}},
			{"invalid json.RawMessage", dbqueue.NewJob{Name: "x", Data: json.RawMessage(`{"to":`)}, []string{"not JSON-encodable", "invalid JSON"}},
			{"bytes that are not JSON", dbqueue.NewJob{Name: "x", Data: []byte("hello")}, []string{"[]byte data must hold JSON", "wrap other bytes"}},
			{"negative delay", dbqueue.NewJob{Name: "x", Delay: -time.Second}, []string{"negative Delay"}},
			{"delay and run-at", dbqueue.NewJob{Name: "x", Delay: time.Minute, RunAt: time.Now().Add(time.Hour)}, []string{"set Delay or RunAt, not both"}},
			{"negative max tries", dbqueue.NewJob{Name: "x", MaxTries: -1}, []string{"must not be negative"}},
			{"negative timeout", dbqueue.NewJob{Name: "x", Timeout: -time.Second}, []string{"must not be negative"}},
			{"negative backoff", dbqueue.NewJob{Name: "x", Backoff: []time.Duration{time.Second, -time.Second}}, []string{"negative backoff"}},
			{"timeout past MaxDelay", dbqueue.NewJob{Name: "x", Timeout: dbqueue.MaxDelay + time.Hour}, []string{"Timeout", "MaxDelay"}},
			{"backoff past MaxDelay", dbqueue.NewJob{Name: "x", Backoff: []time.Duration{dbqueue.MaxDelay + time.Hour}}, []string{"Backoff", "MaxDelay"}},
		} {
			_, err := q.Push(ctx, tc.job)
			wantErr(t, "Push with "+tc.what, err, tc.want...)
			// One bad job stops the whole batch before anything is written.
			_, err = q.PushMany(ctx, []dbqueue.NewJob{{Name: "good"}, tc.job})
			wantErr(t, "PushMany with "+tc.what, err, tc.want...)
		}
		if n := db.Count(t, "SELECT COUNT(*) FROM jobs"); n != 0 {
			t.Fatalf("rejected pushes left %d rows", n)
		}
		if _, err := q.PushTx(ctx, nil, dbqueue.NewJob{Name: "x"}); err == nil || !strings.Contains(err.Error(), "nil *sql.Tx") {
			t.Errorf("PushTx(nil): %v", err)
		}
		if _, err := dbqpgx.PushTx(ctx, q, nil, dbqueue.NewJob{Name: "x"}); err == nil || !strings.Contains(err.Error(), "nil pgx.Tx") {
			t.Errorf("dbqpgx.PushTx(nil): %v", err)
		}

		// The widest name the column holds works on every database.
		widest := strings.Repeat("q", 255)
		id := push(t, q, dbqueue.NewJob{Name: "x", Queue: widest})
		if got := reserve(t, q, 1, widest); len(got) != 1 || got[0].ID != id || got[0].Queue != widest {
			t.Fatalf("255-byte queue name: reserved %v, want job %d", got, id)
		}
	})
}

func TestReserveRejectsBadInput(t *testing.T) {
	q := dbtest.New(t, dbqueue.SQLite).Queue(t)
	for _, n := range []int{-1, 0, 1001} {
		jobs, err := q.Reserve(ctx, n)
		wantErr(t, "Reserve("+strconv.Itoa(n)+")", err, "n must be between 1 and 1000")
		if len(jobs) != 0 {
			t.Errorf("Reserve(%d) returned jobs", n)
		}
	}
	if _, err := q.Reserve(ctx, 1000); err != nil {
		t.Errorf("Reserve(1000): %v", err)
	}
	_, err := q.Reserve(ctx, 1, "")
	wantErr(t, `Reserve from ""`, err, "empty queue name")
	_, err = q.Reserve(ctx, 1, "default", strings.Repeat("q", 256))
	wantErr(t, "Reserve from a 256-byte queue name", err, "longer than the 255")
	if err := q.Release(ctx, &dbqueue.Job{ID: 1, Attempts: 1}, -time.Second); err == nil || !strings.Contains(err.Error(), "negative delay") {
		t.Errorf("Release with a negative delay: %v", err)
	}
}

func TestOptionsRejectBadValues(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	for _, tc := range []struct {
		what string
		opt  dbqueue.Option
		want []string
	}{
		{"WithRetryAfter(0)", dbqueue.WithRetryAfter(0), []string{"at least 1s", "longer than your longest job timeout"}},
		{"WithRetryAfter(-1s)", dbqueue.WithRetryAfter(-time.Second), []string{"at least 1s"}},
		{"WithRetryAfter(500ms)", dbqueue.WithRetryAfter(500 * time.Millisecond), []string{"500ms", "at least 1s"}},
		{`WithDefaultQueue("")`, dbqueue.WithDefaultQueue(""), []string{"WithDefaultQueue", "empty queue name"}},
		{"WithDefaultQueue(256 bytes)", dbqueue.WithDefaultQueue(strings.Repeat("q", 256)), []string{"WithDefaultQueue", "shorter name"}},
		{`WithConnectionName("")`, dbqueue.WithConnectionName(""), []string{"WithConnectionName", "empty name"}},
	} {
		q, err := dbqueue.Open(ctx, db.DSN, tc.opt)
		wantErr(t, "Open with "+tc.what, err, tc.want...)
		if q != nil {
			t.Errorf("Open with %s returned a queue", tc.what)
		}
		_, err = dbqueue.New(ctx, dbqsqlite.New(db.SQL), tc.opt)
		wantErr(t, "New with "+tc.what, err, tc.want...)
	}

	// Laravel counts retry_after in whole seconds; a fraction rounds up, so
	// a reservation never ends sooner than asked.
	q, err := dbqueue.New(ctx, dbqsqlite.New(db.SQL), dbqueue.WithRetryAfter(1500*time.Millisecond), dbqueue.WithDefaultQueue("mail"))
	if err != nil {
		t.Fatal(err)
	}
	if q.RetryAfter() != 2*time.Second || q.DefaultQueue() != "mail" || q.ConnectionName() != "database" {
		t.Fatalf("options: retry after %v, queue %q, connection %q", q.RetryAfter(), q.DefaultQueue(), q.ConnectionName())
	}
	if err := db.SQL.PingContext(ctx); err != nil {
		t.Fatalf("the caller's *sql.DB was closed by a failed New: %v", err)
	}
}

func TestConstructorsRejectBadArguments(t *testing.T) {
	db := dbtest.New(t, dbqueue.SQLite)
	_ = db
	_, err := dbqueue.New(ctx, nil)
	wantErr(t, "New(nil)", err, "nil driver", "dbqpgx.New(pool)")
	_, err = dbqueue.New(ctx, dbqsqlite.New(nil))
	wantErr(t, "New(dbqsqlite.New(nil))", err, "nil pool")
	_, err = dbqueue.New(ctx, dbqpgx.New(nil))
	wantErr(t, "New(dbqpgx.New(nil))", err, "nil pool")
	_, err = dbqueue.New(ctx, dbqmysql.New(nil))
	wantErr(t, "New(dbqmysql.New(nil))", err, "nil pool")

	for _, tc := range []struct {
		dsn  string
		want []string
	}{
		{"", []string{"empty DSN", "postgres://", "sqlite:"}},
		{"  ", []string{"empty DSN"}},
		{"redis://x", []string{`unknown DSN scheme "redis"`, "postgres://", "mysql://", "sqlite:"}},
		{"mysql://root@127.0.0.1:3306", []string{"names no database", "mysql://user@host:3306/app"}},
		{"mysql://root:secret@127.0.0.1:3306/", []string{"names no database"}},
		{"sqlite:", []string{"names no file", "sqlite:./queue.db"}},
		{"localhost:5432", []string{"is not postgres://"}},
	} {
		q, err := dbqueue.Open(ctx, tc.dsn)
		wantErr(t, "Open("+tc.dsn+")", err, tc.want...)
		if q != nil {
			t.Errorf("Open(%q) returned a queue", tc.dsn)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q): the error shows the password: %v", tc.dsn, err)
		}
	}
}

// A driver handed a connection of another database fails at once, saying
// so, instead of failing later with raw syntax errors.
func TestDriverMustMatchConnection(t *testing.T) {
	pg := dbtest.New(t, dbqueue.Postgres)
	my := dbtest.New(t, dbqueue.MySQL)
	lite := dbtest.New(t, dbqueue.SQLite)
	for _, tc := range []struct {
		what string
		drv  dbqueue.Driver
		want string
	}{
		{"dbqmysql on PostgreSQL", dbqmysql.New(pg.SQL), "a mysql database"},
		{"dbqpgx on MariaDB", dbqpgx.NewSQL(my.SQL), "a postgres database"},
		{"dbqsqlite on PostgreSQL", dbqsqlite.New(pg.SQL), "a sqlite database"},
		{"dbqpgx on SQLite", dbqpgx.NewSQL(lite.SQL), "a postgres database"},
		{"dbqmysql on SQLite", dbqmysql.New(lite.SQL), "a mysql database"},
	} {
		q, err := dbqueue.New(ctx, tc.drv)
		wantErr(t, tc.what, err, tc.want, "driver package")
		if q != nil {
			t.Errorf("%s returned a queue", tc.what)
		}
	}
}

// A server that cannot be reached is named as such, not blamed on the
// driver package: the error keeps the driver's own reason and says what to
// check in the DSN.
// TestUnopenableSQLiteFileSaysSo: a SQLite file that cannot be opened is
// not called a server that does not answer.
func TestUnopenableSQLiteFileSaysSo(t *testing.T) {
	_, err := dbqueue.Open(ctx, "sqlite:"+t.TempDir()+"/no/such/dir/q.db")
	wantErr(t, "Open on a file in a missing directory", err, "cannot open the sqlite database file", "directory")
	if strings.Contains(fmt.Sprint(err), "server") {
		t.Errorf("a SQLite file was called a server: %v", err)
	}
}

func TestUnreachableServerSaysSo(t *testing.T) {
	_, err := dbqueue.Open(ctx, "postgres://postgres@127.0.0.1:1/test?connect_timeout=2")
	wantErr(t, "Open on a closed port", err, "cannot confirm the connection is a postgres database", "connection refused", "host, port")
	if strings.Contains(fmt.Sprint(err), "is not a") {
		t.Errorf("an unreachable server was called the wrong database: %v", err)
	}
}

// TestMissingTables: a queue on a database that was never migrated fails at
// once, saying to run the migrations.
func TestMissingTables(t *testing.T) {
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := dbtest.Empty(t, d)
			check := func(what string, q *dbqueue.Queue, err error) {
				t.Helper()
				if q != nil {
					t.Errorf("%s returned a queue", what)
				}
				if !errors.Is(err, sqldb.ErrNoTables) {
					t.Errorf("%s: %v, want ErrNoTables", what, err)
				}
				wantErr(t, what, err, "migrate up", "migrations.Up")
				if msg := fmt.Sprint(err); strings.Contains(msg, ": dbqueue:") {
					t.Errorf("%s: %q nests the \"dbqueue:\" prefix, want it once at the start", what, msg)
				}
			}
			q, err := dbqueue.Open(ctx, db.DSN)
			check("Open", q, err)
			var drv dbqueue.Driver
			switch d {
			case dbqueue.Postgres:
				drv = dbqpgx.NewSQL(db.SQL)
			case dbqueue.MySQL:
				drv = dbqmysql.New(db.SQL)
			default:
				drv = dbqsqlite.New(db.SQL)
			}
			q, err = dbqueue.New(ctx, drv)
			check("New", q, err)
			if d == dbqueue.Postgres {
				pool, err := pgxpool.New(ctx, db.DSN)
				if err != nil {
					t.Fatal(err)
				}
				defer pool.Close()
				q, err = dbqueue.New(ctx, dbqpgx.New(pool))
				check("New(dbqpgx.New(pool))", q, err)
			}
		})
	}
}

func TestParseDSN(t *testing.T) {
	type mysqlWant struct {
		user, passwd, addr, db string
		interpolate            bool
		timeout                time.Duration
	}
	for _, tc := range []struct {
		dsn     string
		dialect dbqueue.Dialect
		driver  string
		conn    string     // the exact driver DSN, when it is the input
		my      *mysqlWant // MySQL: the parsed driver DSN
		sqlite  string     // SQLite: the file part of the driver DSN
		wal     bool
	}{
		{dsn: "postgres://app:pw@db.example:5432/app?sslmode=disable", dialect: dbqueue.Postgres, driver: "pgx", conn: "postgres://app:pw@db.example:5432/app?sslmode=disable"},
		{dsn: "postgresql://app@localhost/app", dialect: dbqueue.Postgres, driver: "pgx", conn: "postgresql://app@localhost/app"},
		{dsn: " postgres://app@localhost/app\n", dialect: dbqueue.Postgres, driver: "pgx", conn: "postgres://app@localhost/app"},
		{dsn: "mysql://user:pw@host:3306/db?timeout=5s", dialect: dbqueue.MySQL, driver: "mysql",
			my: &mysqlWant{"user", "pw", "host:3306", "db", true, 5 * time.Second}},
		{dsn: "mysql://user@host/db", dialect: dbqueue.MySQL, driver: "mysql",
			my: &mysqlWant{"user", "", "host:3306", "db", true, 0}},
		{dsn: "mysql://u:p%40ss%2Fw@[::1]/db", dialect: dbqueue.MySQL, driver: "mysql",
			my: &mysqlWant{"u", "p@ss/w", "[::1]:3306", "db", true, 0}},
		{dsn: "mysql://u@host:3307/db?interpolateParams=false", dialect: dbqueue.MySQL, driver: "mysql",
			my: &mysqlWant{"u", "", "host:3307", "db", false, 0}},
		{dsn: "user:pw@tcp(127.0.0.1:3306)/db?timeout=2s", dialect: dbqueue.MySQL, driver: "mysql",
			my: &mysqlWant{"user", "pw", "127.0.0.1:3306", "db", true, 2 * time.Second}},
		{dsn: "user:pw@tcp(127.0.0.1:3306)/db?interpolateParams=false&parseTime=false", dialect: dbqueue.MySQL, driver: "mysql",
			my: &mysqlWant{"user", "pw", "127.0.0.1:3306", "db", false, 0}},
		{dsn: "sqlite:./a.db", dialect: dbqueue.SQLite, driver: "sqlite", sqlite: "file:./a.db", wal: true},
		{dsn: "sqlite://./a.db", dialect: dbqueue.SQLite, driver: "sqlite", sqlite: "file:./a.db", wal: true},
		{dsn: "sqlite:///var/lib/app/queue.db", dialect: dbqueue.SQLite, driver: "sqlite", sqlite: "file:/var/lib/app/queue.db", wal: true},
		{dsn: "file:./a.db", dialect: dbqueue.SQLite, driver: "sqlite", sqlite: "file:./a.db", wal: true},
		{dsn: "sqlite::memory:", dialect: dbqueue.SQLite, driver: "sqlite", sqlite: "file::memory:", wal: false},
	} {
		t.Run(tc.dsn, func(t *testing.T) {
			got, err := dbqueue.ParseDSN(tc.dsn)
			if err != nil {
				t.Fatal(err)
			}
			if got.Dialect != tc.dialect || got.Driver != tc.driver {
				t.Fatalf("got %s/%s, want %s/%s", got.Dialect, got.Driver, tc.dialect, tc.driver)
			}
			if tc.conn != "" && got.Conn != tc.conn {
				t.Errorf("conn %q, want %q", got.Conn, tc.conn)
			}
			if tc.my != nil {
				cfg, err := mysql.ParseDSN(got.Conn)
				if err != nil {
					t.Fatalf("the driver cannot read %q: %v", got.Conn, err)
				}
				w := tc.my
				if cfg.User != w.user || cfg.Passwd != w.passwd || cfg.Net != "tcp" || cfg.Addr != w.addr || cfg.DBName != w.db {
					t.Errorf("%q: user %q pw %q %s(%s) db %q", got.Conn, cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName)
				}
				if !cfg.ParseTime {
					t.Errorf("%q: parseTime is off; the migration lock and timestamps need it", got.Conn)
				}
				if cfg.InterpolateParams != w.interpolate {
					t.Errorf("%q: interpolateParams %v, want %v", got.Conn, cfg.InterpolateParams, w.interpolate)
				}
				if cfg.Timeout != w.timeout {
					t.Errorf("%q: timeout %v, want %v (the DSN's own parameters are kept)", got.Conn, cfg.Timeout, w.timeout)
				}
			}
			if tc.sqlite != "" {
				file, query, _ := strings.Cut(got.Conn, "?")
				params, err := url.ParseQuery(query)
				if file != tc.sqlite || err != nil {
					t.Fatalf("conn %q: file %q (%v), want %q", got.Conn, file, err, tc.sqlite)
				}
				pragmas := params["_pragma"]
				for _, p := range []string{"busy_timeout(10000)", "synchronous(NORMAL)"} {
					if !slices.Contains(pragmas, p) {
						t.Errorf("conn %q lacks pragma %s", got.Conn, p)
					}
				}
				if slices.Contains(pragmas, "journal_mode(WAL)") != tc.wal {
					t.Errorf("conn %q: WAL %v, want %v", got.Conn, !tc.wal, tc.wal)
				}
				if params.Get("_txlock") != "immediate" {
					t.Errorf("conn %q: _txlock %q, want immediate", got.Conn, params.Get("_txlock"))
				}
			}
		})
	}

	// SQLite settings the DSN makes itself are kept.
	got, err := dbqueue.ParseDSN("sqlite:./a.db?_pragma=journal_mode(DELETE)&_txlock=deferred")
	if err != nil {
		t.Fatal(err)
	}
	_, query, _ := strings.Cut(got.Conn, "?")
	params, _ := url.ParseQuery(query)
	if !slices.Contains(params["_pragma"], "journal_mode(DELETE)") || slices.Contains(params["_pragma"], "journal_mode(WAL)") || params.Get("_txlock") != "deferred" {
		t.Errorf("own settings overridden: %q", got.Conn)
	}

	for _, dsn := range []string{
		"postgres://app:secret@db.example:badport/app",
		"mysql://app:secret@db.example:badport/app",
	} {
		_, err := dbqueue.ParseDSN(dsn)
		wantErr(t, "ParseDSN("+dsn+")", err, "bad", "badport")
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseDSN(%q): the error shows the password: %v", dsn, err)
		}
	}
}

// readFixture reads a payload captured from Laravel 8.
func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "laravel", name))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestDecodeLaravelPayloads(t *testing.T) {
	t.Run("string job", func(t *testing.T) {
		// Queue::push('DbqInterop\Recorder@handle', $data)
		p, err := dbqueue.DecodePayload(readFixture(t, "string_job.json"))
		if err != nil {
			t.Fatal(err)
		}
		if p.Name() != `DbqInterop\Recorder@handle` || p.DisplayName != `DbqInterop\Recorder` || p.UUID != "a5eff913-1455-4e17-b49e-9659fe65eb22" {
			t.Errorf("name %q, display name %q, uuid %q", p.Name(), p.DisplayName, p.UUID)
		}
		if p.MaxTries != nil || p.MaxExceptions != nil || p.Timeout != nil || p.RetryUntil != nil || p.Backoff != nil || p.FailOnTimeout {
			t.Errorf("nulls not kept as nil: %+v", p)
		}
		var data struct {
			N      int    `json:"n"`
			Path   string `json:"path"`
			Name   string `json:"name"`
			Nested struct {
				List []any `json:"list"`
			} `json:"nested"`
		}
		if err := json.Unmarshal(p.Data, &data); err != nil {
			t.Fatal(err)
		}
		if data.N != 42 || data.Path != "a/b" || data.Name != "Zoë" || len(data.Nested.List) != 4 {
			t.Errorf("data %+v", data)
		}
	})
	t.Run("object job", func(t *testing.T) {
		// dispatch(new InteropJob(...)) with $tries = 3, $backoff = [1, 5, 10], $timeout = 30
		p, err := dbqueue.DecodePayload(readFixture(t, "object_job.json"))
		if err != nil {
			t.Fatal(err)
		}
		if p.Job != `Illuminate\Queue\CallQueuedHandler@call` || p.Name() != `DbqInterop\InteropJob` {
			t.Errorf("an object job must route by displayName: job %q, name %q", p.Job, p.Name())
		}
		if p.MaxTries == nil || *p.MaxTries != 3 || p.MaxExceptions != nil || p.FailOnTimeout || p.RetryUntil != nil {
			t.Errorf("options %+v", p)
		}
		if !slices.Equal(p.Backoff, dbqueue.Backoff{1, 5, 10}) {
			t.Errorf("backoff %v, want [1 5 10]", p.Backoff)
		}
		if p.Timeout == nil || p.Timeout.Duration() != 30*time.Second {
			t.Errorf("timeout %v, want 30s", p.Timeout)
		}
		var data struct {
			CommandName string `json:"commandName"`
			Command     string `json:"command"`
		}
		if err := json.Unmarshal(p.Data, &data); err != nil || data.CommandName != `DbqInterop\InteropJob` || !strings.HasPrefix(data.Command, "O:21:") {
			t.Errorf("data %+v (%v)", data, err)
		}
	})
	t.Run("object job with retryUntil", func(t *testing.T) {
		// $tries = 0, $backoff = 30, retryUntil() = now + 300
		p, err := dbqueue.DecodePayload(readFixture(t, "object_job_retry_until.json"))
		if err != nil {
			t.Fatal(err)
		}
		if p.Name() != `DbqInterop\InteropJob` || !slices.Equal(p.Backoff, dbqueue.Backoff{30}) ||
			p.RetryUntil == nil || *p.RetryUntil != 1795272458 || p.MaxTries == nil || *p.MaxTries != 0 ||
			p.Timeout == nil || *p.Timeout != 10 {
			t.Errorf("decoded %+v", p)
		}
	})
	t.Run("object job without a display name", func(t *testing.T) {
		p, err := dbqueue.DecodePayload([]byte(`{"job":"Illuminate\\Queue\\CallQueuedHandler@call","displayName":""}`))
		if err != nil || p.Name() != `Illuminate\Queue\CallQueuedHandler@call` {
			t.Errorf("name %q (%v), want the job name when there is no display name", p.Name(), err)
		}
	})
	t.Run("newer Laravel keys", func(t *testing.T) {
		p, err := dbqueue.DecodePayload([]byte(`{"uuid":"u","job":"A@handle","delay":"30","createdAt":1700000000,"tags":["x"]}`))
		if err != nil || p.Delay == nil || *p.Delay != 30 || p.CreatedAt == nil || *p.CreatedAt != 1700000000 {
			t.Errorf("decoded %+v (%v)", p, err)
		}
	})
}

func TestDecodeMalformedPayloads(t *testing.T) {
	for _, tc := range []struct {
		raw, uuid string
		want      string
	}{
		{`{not json`, "", "malformed payload"},
		{`[1,2]`, "", "malformed payload"},
		{`{"uuid":"u1","data":1}`, "u1", `no "job" name`},
		{`{"uuid":"u2","job":""}`, "u2", `no "job" name`},
		{`{"uuid":"u3","job":5}`, "u3", "malformed payload"},
		{`{"uuid":"u4","job":"A","backoff":"1,x"}`, "u4", `"x" is not a whole number of seconds`},
		{`{"uuid":"u5","job":"A","timeout":"soon"}`, "u5", "not a number of seconds"},
	} {
		p, err := dbqueue.DecodePayload([]byte(tc.raw))
		wantErr(t, "DecodePayload("+tc.raw+")", err, tc.want)
		if p.UUID != tc.uuid {
			t.Errorf("DecodePayload(%s): uuid %q, want %q kept for failed_jobs", tc.raw, p.UUID, tc.uuid)
		}
	}
}

func TestBackoffJSON(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want dbqueue.Backoff
	}{
		{`"1,5,10"`, dbqueue.Backoff{1, 5, 10}},
		{`" 1, 5 ,10 "`, dbqueue.Backoff{1, 5, 10}},
		{`"30"`, dbqueue.Backoff{30}},
		{`30`, dbqueue.Backoff{30}},
		{`30.0`, dbqueue.Backoff{30}},
		{`[1,5,10]`, dbqueue.Backoff{1, 5, 10}},
		{`["1","5"]`, dbqueue.Backoff{1, 5}},
		{`null`, nil},
		{`""`, nil},
	} {
		var b dbqueue.Backoff
		if err := json.Unmarshal([]byte(tc.in), &b); err != nil {
			t.Errorf("backoff %s: %v", tc.in, err)
			continue
		}
		if !slices.Equal(b, tc.want) {
			t.Errorf("backoff %s = %v, want %v", tc.in, b, tc.want)
		}
	}
	for _, in := range []string{`"1,x"`, `true`, `{}`, `[1,"x"]`, `"1.5.2"`} {
		var b dbqueue.Backoff
		if err := json.Unmarshal([]byte(in), &b); err == nil {
			t.Errorf("backoff %s decoded to %v, want an error", in, b)
		}
	}
	// Written in Laravel 8's own form, so a PHP worker reads it.
	for _, tc := range []struct {
		b    dbqueue.Backoff
		want string
	}{{dbqueue.Backoff{1, 5, 10}, `"1,5,10"`}, {dbqueue.Backoff{30}, `"30"`}, {nil, `null`}, {dbqueue.Backoff{}, `null`}} {
		out, err := json.Marshal(tc.b)
		if err != nil || string(out) != tc.want {
			t.Errorf("marshal %v = %s (%v), want %s", tc.b, out, err, tc.want)
		}
	}
}

func TestSecondsJSON(t *testing.T) {
	for _, in := range []string{`60`, `60.0`, `"60"`, `" 60 "`, `60.9`, `6e1`} {
		var s dbqueue.Seconds
		if err := json.Unmarshal([]byte(in), &s); err != nil || s != 60 || s.Duration() != time.Minute {
			t.Errorf("seconds %s = %d (%v), want 60", in, s, err)
		}
	}
	for _, in := range []string{`"abc"`, `true`, `""`, `"NaN"`, `"Inf"`, `[60]`} {
		var s dbqueue.Seconds
		if err := json.Unmarshal([]byte(in), &s); err == nil {
			t.Errorf("seconds %s decoded to %d, want an error", in, s)
		}
	}
	var p struct {
		Timeout *dbqueue.Seconds `json:"timeout"`
	}
	if err := json.Unmarshal([]byte(`{"timeout":null}`), &p); err != nil || p.Timeout != nil {
		t.Errorf("null timeout: %v, %v; want nil", p.Timeout, err)
	}
}

func TestBackoffDelay(t *testing.T) {
	b := dbqueue.Backoff{1, 5, 10}
	for attempts, want := range map[int]time.Duration{
		0:  time.Second, // before any attempt: the first value
		1:  time.Second, // after attempt 1: backoff[0]
		2:  5 * time.Second,
		3:  10 * time.Second,
		4:  10 * time.Second, // the last value repeats
		50: 10 * time.Second,
	} {
		if got := b.Delay(attempts); got != want {
			t.Errorf("%v.Delay(%d) = %v, want %v", b, attempts, got, want)
		}
	}
	if got := (dbqueue.Backoff{30}).Delay(7); got != 30*time.Second {
		t.Errorf("single backoff: Delay(7) = %v, want 30s", got)
	}
	if got := dbqueue.Backoff(nil).Delay(3); got != 0 {
		t.Errorf("no backoff: Delay(3) = %v, want 0", got)
	}
}
