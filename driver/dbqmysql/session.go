package dbqmysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// setReadCommitted is standard SQL that MySQL 8 and MariaDB both accept,
// unlike the session variable (transaction_isolation on MySQL 8,
// tx_isolation on MariaDB before 11.1) a DSN parameter would have to name.
const setReadCommitted = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"

// readCommittedSessions opens a MySQL pool whose every connection starts in
// READ COMMITTED, and returns it adapted as an owned DB that knows it: a
// transaction asking for READ COMMITTED then begins without its own
// SET TRANSACTION, one round trip fewer on every MySQL claim. Use it only
// for pools the queue owns; it changes the isolation of all their work.
func readCommittedSessions(c driver.Connector) sqldb.DB {
	return sqldb.ReadCommittedSQLDB(sql.OpenDB(rcConnector{c}))
}

type rcConnector struct{ driver.Connector }

func (c rcConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	ex, ok := conn.(driver.ExecerContext)
	if !ok {
		_ = conn.Close()
		return nil, fmt.Errorf("sqldb: driver connection %T cannot run %q", conn, setReadCommitted)
	}
	if _, err := ex.ExecContext(ctx, setReadCommitted, nil); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("sqldb: start the session in READ COMMITTED: %w", err)
	}
	return conn, nil
}
