package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/dbqueue/dbqueue"
)

// autovacuumVersion is the migration that sets the jobs table's
// autovacuum options on PostgreSQL (00012_jobs_autovacuum).
const autovacuumVersion = 12

// autovacuumNote says which autovacuum options the jobs table has after
// migration 00012 ran, so that `migrate up` tells the operator it changed
// how the server vacuums that table (and that options set before stayed).
func autovacuumNote(ctx context.Context, db *sql.DB, t Tables) (string, error) {
	var opts sql.NullString
	err := db.QueryRowContext(ctx, "SELECT array_to_string(reloptions, ', ') FROM pg_class WHERE oid = $1::regclass", t.JobsTable()).Scan(&opts)
	if err != nil {
		return "", fmt.Errorf("read %s's options: %w", t.JobsTable(), err)
	}
	var av []string
	for _, o := range strings.Split(opts.String, ", ") {
		if strings.HasPrefix(o, "autovacuum_") {
			av = append(av, o)
		}
	}
	return fmt.Sprintf("set autovacuum on %s (%s), so that vacuum keeps pace with a busy queue; options set before were kept (docs/measurements/churn.md)", t.JobsTable(), strings.Join(av, ", ")), nil
}

// notesFor are the lines Up reports for the migrations in res beyond
// widened columns: today only 00012's autovacuum options on PostgreSQL.
func (m *Migrator) notesFor(ctx context.Context, res []*Result) ([]string, error) {
	if m.dialect != dbqueue.Postgres {
		return nil, nil
	}
	for _, r := range res {
		if r != nil && r.Source != nil && r.Source.Version == autovacuumVersion && r.Error == nil {
			note, err := autovacuumNote(ctx, m.db, m.tables)
			if err != nil {
				return nil, err
			}
			return []string{note}, nil
		}
	}
	return nil, nil
}
