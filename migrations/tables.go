package migrations

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"regexp"
	"strings"
	"testing/fstest"
	"text/template"

	"github.com/dbqueue/dbqueue"
)

// Default table names: Laravel's.
const (
	DefaultJobs   = "jobs"
	DefaultFailed = "failed_jobs"
)

// Tables names the tables one dbqueue installation uses. Zero fields take
// the defaults (Laravel's jobs and failed_jobs, the connection's current
// schema), so Tables{} is the default set.
//
// Two installations with different Jobs names live side by side in one
// database: each has its own signals table and its own migration version
// table, and migrates independently.
type Tables struct {
	// Jobs is the jobs table (default "jobs").
	Jobs string
	// Failed is the failed jobs table (default "failed_jobs").
	Failed string
	// Schema is the PostgreSQL schema that holds every table, created by
	// Up when missing. Empty: the connection's current schema
	// (search_path). MySQL and SQLite have no schemas: name the database in
	// the DSN instead.
	Schema string
}

func (t Tables) withDefaults() Tables {
	if t.Jobs == "" {
		t.Jobs = DefaultJobs
	}
	if t.Failed == "" {
		t.Failed = DefaultFailed
	}
	return t
}

func (t Tables) isDefault() bool {
	t = t.withDefaults()
	return t.Jobs == DefaultJobs && t.Failed == DefaultFailed
}

// prefixed is name for the default table set, and <jobs>_name otherwise.
func (t Tables) prefixed(name string) string {
	if t.isDefault() {
		return name
	}
	return t.withDefaults().Jobs + "_" + name
}

func (t Tables) qualify(name string) string {
	if t.Schema == "" {
		return name
	}
	return t.Schema + "." + name
}

// VersionTable is where this table set's applied migrations are recorded:
// dbqueue_migrations for the default set, <jobs>_dbqueue_migrations
// otherwise, schema-qualified when Schema is set.
func (t Tables) VersionTable() string { return t.qualify(t.prefixed(VersionTable)) }

// SignalsTable is the table of worker signals (restart, paused queues) of
// this table set: dbqueue_signals for the default set, <jobs>_signals
// otherwise, schema-qualified when Schema is set. Signals are not shared
// between table sets, so rolling one set back never drops another's.
func (t Tables) SignalsTable() string { return t.qualify(t.signalsName()) }

func (t Tables) signalsName() string {
	if t.isDefault() {
		return "dbqueue_signals"
	}
	return t.withDefaults().Jobs + "_signals"
}

// BatchesTable is the table of job batches (dbqueue.Queue.Batch) of this
// table set: Laravel's job_batches for the default set, <jobs>_batches
// otherwise, schema-qualified when Schema is set.
func (t Tables) BatchesTable() string { return t.qualify(t.batchesName()) }

func (t Tables) batchesName() string {
	if t.isDefault() {
		return "job_batches"
	}
	return t.withDefaults().Jobs + "_batches"
}

// ErrorsTable is the error history of this table set (the errors of
// jobs' earlier attempts): dbqueue_job_errors for the default set,
// <jobs>_errors otherwise, schema-qualified when Schema is set.
func (t Tables) ErrorsTable() string { return t.qualify(t.errorsName()) }

func (t Tables) errorsName() string {
	if t.isDefault() {
		return "dbqueue_job_errors"
	}
	return t.withDefaults().Jobs + "_errors"
}

// JobsTable is the jobs table's name as SQL uses it, schema-qualified when
// Schema is set.
func (t Tables) JobsTable() string { return t.qualify(t.withDefaults().Jobs) }

// FailedTable is the failed jobs table's name as SQL uses it,
// schema-qualified when Schema is set.
func (t Tables) FailedTable() string { return t.qualify(t.withDefaults().Failed) }

// maxIdentifier is PostgreSQL's identifier limit (MySQL's is 64).
const maxIdentifier = 63

var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// Validate reports whether the names can be used on dialect: lower-case
// letters, digits and underscores, not starting with a digit, short enough
// for every name derived from them (indexes, version table), and a schema
// only on PostgreSQL.
func (t Tables) Validate(dialect dbqueue.Dialect) error {
	t = t.withDefaults()
	check := func(field, name string) error {
		if !identifier.MatchString(name) {
			return fmt.Errorf("migrations: table name %s %q: use lower-case letters, digits and underscores, not starting with a digit", field, name)
		}
		return nil
	}
	if err := check("Jobs", t.Jobs); err != nil {
		return err
	}
	if err := check("Failed", t.Failed); err != nil {
		return err
	}
	if t.Jobs == t.Failed {
		return fmt.Errorf("migrations: Jobs and Failed are both %q: name two different tables", t.Jobs)
	}
	if t.Schema != "" {
		if dialect != dbqueue.Postgres {
			return fmt.Errorf("migrations: Schema %q is for PostgreSQL only: on %s, name the database in the DSN instead", t.Schema, dialect)
		}
		if err := check("Schema", t.Schema); err != nil {
			return err
		}
		if len(t.Schema) > maxIdentifier {
			return fmt.Errorf("migrations: Schema %q is longer than %d characters", t.Schema, maxIdentifier)
		}
	}
	// Every identifier the migrations make from the names.
	derived := []struct{ field, name string }{
		{"Jobs", t.prefixed(VersionTable) + "_lock"},
		{"Jobs", t.Jobs + "_queue_reserved_available_idx"},
		{"Jobs", t.Jobs + "_queue_available_idx"},
		{"Jobs", t.Jobs + "_queue_reserved_idx"},
		{"Jobs", t.batchesName()},
		{"Failed", t.Failed + "_failed_at_idx"},
		{"Failed", t.Failed + "_uuid_unique"},
		{"Jobs", t.Jobs + "_limits"},
		{"Jobs", t.Jobs + "_locks"},
		{"Jobs", t.Jobs + "_metrics"},
		{"Jobs", t.Jobs + "_metrics_hourly"},
		{"Jobs", t.Jobs + "_workers"},
		{"Jobs", t.Jobs + "_schedules"},
		{"Jobs", t.Jobs + "_history_finished_idx"},
		{"Jobs", t.errorsName() + "_uuid"},
	}
	for _, d := range derived {
		if len(d.name) > maxIdentifier {
			return fmt.Errorf("migrations: table name %s is too long: it makes %s, longer than %d characters; choose a shorter name", d.field, d.name, maxIdentifier)
		}
	}
	return nil
}

// format is the file layout FS produces.
type format int

const (
	formatGoose format = iota
	formatGolangMigrate
)

// Option configures New, Up, UpDSN and FS.
type Option func(*config)

type config struct {
	tables    Tables
	format    format
	logger    *slog.Logger
	loggerSet bool
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// WithTables makes the migrations create and track the named tables
// instead of jobs and failed_jobs.
func WithTables(t Tables) Option { return func(c *config) { c.tables = t } }

// WithLogger sets where Up reports what it changed in existing tables
// (the widened columns of a table Laravel created). Default:
// slog.Default(). nil: report nothing (Migrator.Widened still lists them).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger, c.loggerSet = l, true }
}

// FormatGolangMigrate makes FS lay the files out as golang-migrate reads
// them: 00001_create_jobs.up.sql and 00001_create_jobs.down.sql, without
// goose's annotations. Only FS takes it.
var FormatGolangMigrate Option = func(c *config) { c.format = formatGolangMigrate }

// templateData is what the SQL templates see.
type templateData struct {
	Jobs, Failed, Signals string // as statements use them (schema-qualified)
	Unique                string // the unique-lock table, schema-qualified
	JobsName, FailedName  string // bare, for index names and catalog lookups
	SignalsName           string // bare
	Schema                string
	// Batches is the job batches table, schema-qualified; BatchesName bare.
	Batches, BatchesName string
	// Errors is the error history table, schema-qualified; ErrorsName bare.
	Errors, ErrorsName string
}

// FS returns dbqueue's migrations for dialect as SQL files, rendered for
// the table names given WithTables (default: jobs and failed_jobs), for
// running with another migration tool.
//
// By default the files are goose's: 00001_create_jobs.sql and so on, each
// with -- +goose Up and -- +goose Down sections. With FormatGolangMigrate
// they are golang-migrate's NNNNN_name.up.sql and NNNNN_name.down.sql.
// Copy them to a directory with os.CopyFS. See docs/migrations.md.
func FS(dialect dbqueue.Dialect, opts ...Option) (fs.FS, error) {
	c := newConfig(opts)
	rendered, err := render(dialect, c.tables)
	if err != nil {
		return nil, err
	}
	if c.format != formatGolangMigrate {
		return rendered, nil
	}
	out := fstest.MapFS{}
	for name, f := range rendered {
		up, down, err := splitGoose(string(f.Data))
		if err != nil {
			return nil, fmt.Errorf("migrations: %s: %w", name, err)
		}
		base := strings.TrimSuffix(name, ".sql")
		out[base+".up.sql"] = &fstest.MapFile{Data: []byte(up), Mode: 0o444}
		out[base+".down.sql"] = &fstest.MapFile{Data: []byte(down), Mode: 0o444}
	}
	return out, nil
}

// render executes the dialect's templates into goose SQL files.
func render(dialect dbqueue.Dialect, t Tables) (fstest.MapFS, error) {
	switch dialect {
	case dbqueue.Postgres, dbqueue.MySQL, dbqueue.SQLite:
	default:
		return nil, fmt.Errorf("migrations: unknown dialect %q: use dbqueue.Postgres, dbqueue.MySQL or dbqueue.SQLite", dialect)
	}
	if err := t.Validate(dialect); err != nil {
		return nil, err
	}
	full := t.withDefaults()
	data := templateData{
		Jobs:        t.JobsTable(),
		Failed:      t.FailedTable(),
		Signals:     t.SignalsTable(),
		Unique:      t.UniqueTable(),
		JobsName:    full.Jobs,
		FailedName:  full.Failed,
		SignalsName: t.signalsName(),
		Schema:      t.Schema,

		Batches:     t.BatchesTable(),
		BatchesName: t.batchesName(),

		Errors:     t.ErrorsTable(),
		ErrorsName: t.errorsName(),
	}
	names, err := fs.Glob(files, string(dialect)+"/*.sql.tmpl")
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("migrations: no %s migrations embedded", dialect)
	}
	out := fstest.MapFS{}
	for _, name := range names {
		src, err := fs.ReadFile(files, name)
		if err != nil {
			return nil, err
		}
		tmpl, err := template.New(name).Option("missingkey=error").Parse(string(src))
		if err != nil {
			return nil, fmt.Errorf("migrations: template %s: %w", name, err)
		}
		var b bytes.Buffer
		if err := tmpl.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("migrations: template %s: %w", name, err)
		}
		out[strings.TrimSuffix(path.Base(name), ".tmpl")] = &fstest.MapFile{Data: b.Bytes(), Mode: 0o444}
	}
	return out, nil
}

// splitGoose cuts a goose SQL file into its up and down parts, keeping
// the comments above -- +goose Up in both.
func splitGoose(src string) (up, down string, err error) {
	const upMark, downMark = "-- +goose Up\n", "-- +goose Down\n"
	head, rest, ok := strings.Cut(src, upMark)
	if !ok {
		return "", "", errors.New("no -- +goose Up line")
	}
	upBody, downBody, ok := strings.Cut(rest, downMark)
	if !ok {
		return "", "", errors.New("no -- +goose Down line")
	}
	if strings.Contains(src, "+goose StatementBegin") || strings.Contains(downBody, "+goose") {
		return "", "", errors.New("goose annotations golang-migrate cannot read")
	}
	return head + strings.TrimLeft(upBody, "\n"), head + strings.TrimLeft(downBody, "\n"), nil
}
