//go:build linux

package dbtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/dbqueue/dbqueue"
)

// WithAppName returns dsn with a PostgreSQL application_name, so the
// connections of the process using it can be found in pg_stat_activity and
// killed by KillConnections. Other dialects' DSNs are returned unchanged.
func WithAppName(d dbqueue.Dialect, dsn, name string) string {
	if d != dbqueue.Postgres {
		return dsn
	}
	return withQuery(dsn, "application_name", name)
}

// KillConnections ends, on the server, every connection that process pid
// holds to this test's database, as a network fault or an administrator
// does: PostgreSQL terminates the backends whose application_name is
// appName (see WithAppName); MySQL kills the threads whose client port is
// a TCP socket of pid (read from /proc), found in the processlist by this
// test's database. It returns how many it ended. Connections of other
// processes and other tests are never touched.
func (db *DB) KillConnections(ctx context.Context, pid int, appName string) (int, error) {
	switch db.Dialect {
	case dbqueue.Postgres:
		if appName == "" {
			return 0, errors.New("dbtest: KillConnections on PostgreSQL needs the application_name")
		}
		var n int
		err := db.SQL.QueryRowContext(ctx, `SELECT COUNT(*) FROM (
			SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
			WHERE application_name = $1 AND pid <> pg_backend_pid()) t WHERE ok`, appName).Scan(&n)
		return n, err
	case dbqueue.MySQL:
		ports, err := tcpPorts(pid)
		if err != nil {
			return 0, err
		}
		rows, err := db.SQL.QueryContext(ctx,
			"SELECT ID, HOST FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID <> CONNECTION_ID()")
		if err != nil {
			return 0, err
		}
		var ids []int64
		for rows.Next() {
			var id int64
			var host string
			if err := rows.Scan(&id, &host); err != nil {
				rows.Close()
				return 0, err
			}
			i := strings.LastIndexByte(host, ':')
			if i < 0 {
				continue
			}
			if port, err := strconv.Atoi(host[i+1:]); err == nil && ports[port] {
				ids = append(ids, id)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, err
		}
		n := 0
		for _, id := range ids {
			_, err := db.SQL.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10))
			var my *mysql.MySQLError
			if errors.As(err, &my) && my.Number == 1094 { // unknown thread: it ended first
				continue
			}
			if err != nil {
				return n, err
			}
			n++
		}
		return n, nil
	}
	return 0, fmt.Errorf("dbtest: cannot kill %s connections", db.Dialect)
}

// tcpPorts returns the local ports of the TCP sockets process pid has open.
func tcpPorts(pid int) (map[int]bool, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	ports := map[int]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || !inodes[fields[9]] {
				continue
			}
			_, hexPort, ok := strings.Cut(fields[1], ":")
			if !ok {
				continue
			}
			if port, err := strconv.ParseInt(hexPort, 16, 32); err == nil {
				ports[int(port)] = true
			}
		}
		f.Close()
	}
	return ports, nil
}
