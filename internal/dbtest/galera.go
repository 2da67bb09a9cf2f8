//go:build linux

package dbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/migrations"
)

// GaleraProvider is the wsrep provider library a Galera node loads; a
// variable so a machine with another path can say so.
var GaleraProvider = envOr("DBQUEUE_TEST_GALERA_PROVIDER", "/usr/lib/galera/libgalera_smm.so")

// Cluster is a private three-node MariaDB Galera cluster started for one
// test: three mariadbd processes on loopback ports, each in its own
// temporary directory, replicating every write to the others. Tests run
// dbqueue on all three nodes at once to prove that claims and finishes on
// different nodes, whose row locks do not reach each other, stay correct.
// The nodes are killed and their directories removed when the test ends.
type Cluster struct {
	// Nodes are the cluster's members; Nodes[i].DSN reaches node i as root.
	Nodes []*Server

	t testing.TB
}

// StartGalera initialises and starts a three-node Galera cluster and waits
// until every node reports wsrep_ready=ON, wsrep_cluster_size=3 and
// Synced. Missing binaries skip the test, or fail it under CI.
//
// The start is kept short for CI: small InnoDB buffers and logs, one
// mariadb-install-db run (for node 1; the joiners start empty and receive
// node 1's data by an rsync state transfer, SST). About 35s on a busy
// two-core machine, most of it the SST scripts.
func StartGalera(t testing.TB) *Cluster {
	t.Helper()
	for _, bin := range []string{MariaDBD, MariaDBInit, GaleraProvider} {
		if _, err := os.Stat(bin); err != nil {
			missing(t, fmt.Sprintf("no MariaDB Galera binaries for a private cluster: %v (install galera-4 and rsync, or set DBQUEUE_TEST_GALERA_PROVIDER, DBQUEUE_TEST_MARIADBD and DBQUEUE_TEST_MARIADB_INSTALL_DB)", err))
		}
	}
	if _, err := osexec.LookPath("rsync"); err != nil {
		missing(t, "no rsync for Galera's state transfer: "+err.Error())
	}
	const n = 3
	c := &Cluster{t: t}
	type ports struct{ client, gcomm, ist, sst int }
	p := make([]ports, n)
	var members []string
	for i := range p {
		p[i] = ports{freePort(t), freePort(t), freePort(t), freePort(t)}
		members = append(members, fmt.Sprintf("127.0.0.1:%d", p[i].gcomm))
	}
	for i := range n {
		s := &Server{Dialect: dbqueue.MySQL, t: t, port: p[i].client}
		s.mkdir()
		s.DSN = fmt.Sprintf("root@tcp(127.0.0.1:%d)/", s.port)
		s.args = []string{
			"--wsrep-on=ON",
			"--wsrep-provider=" + GaleraProvider,
			"--wsrep-cluster-name=dbqueue-test",
			"--wsrep-cluster-address=gcomm://" + strings.Join(members, ","),
			fmt.Sprintf("--wsrep-node-name=node%d", i+1),
			fmt.Sprintf("--wsrep-node-address=127.0.0.1:%d", p[i].gcomm),
			fmt.Sprintf("--wsrep-node-incoming-address=127.0.0.1:%d", p[i].client),
			fmt.Sprintf("--wsrep-sst-receive-address=127.0.0.1:%d", p[i].sst),
			"--wsrep-sst-method=rsync",
			// A small gcache and no saved view: throwaway nodes. The evs
			// timeouts are the defaults; the tests never partition.
			fmt.Sprintf("--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:%d;ist.recv_addr=127.0.0.1:%d;gcache.size=64M;pc.recovery=false", p[i].gcomm, p[i].ist),
			"--wsrep-slave-threads=2",
			"--binlog-format=ROW",
			"--default-storage-engine=InnoDB",
			"--innodb-autoinc-lock-mode=2",
			"--innodb-buffer-pool-size=64M",
			"--innodb-log-file-size=16M",
			"--innodb-doublewrite=0",
			"--skip-name-resolve",
		}
		if i == 0 {
			s.args = append(s.args, "--wsrep-new-cluster")
		}
		c.Nodes = append(c.Nodes, s)
	}
	c.initData()
	t.Cleanup(func() {
		if t.Failed() {
			for i, s := range c.Nodes {
				t.Logf("Galera node %d log (last 6000 bytes):\n%s", i+1, tail(s.Logs(), 6000))
			}
		}
	})
	// Node 1 bootstraps the cluster; the others join it one at a time:
	// joined together, the second joiner's state transfer waits for the
	// first's, and the overlap measured no faster.
	for i, s := range c.Nodes {
		s.start()
		c.waitReady(c.Nodes[:i+1], i+1)
	}
	return c
}

// initData runs mariadb-install-db for node 1 and leaves the joiners'
// data directories empty for the SST to fill.
func (c *Cluster) initData() {
	t := c.t
	first := c.Nodes[0]
	args := []string{"--no-defaults", "--datadir=" + first.data(), "--auth-root-authentication-method=normal",
		"--skip-test-db", "--innodb-log-file-size=16M"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	install := osexec.Command(MariaDBInit, args...)
	install.Dir = first.dir // every child starts in a directory of its own
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	for _, s := range c.Nodes[1:] {
		if err := os.Mkdir(s.data(), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() == 0 {
		// The joiner's rsync daemon, started as root by the SST script,
		// writes as nobody (rsyncd's default uid): let it in.
		for _, s := range c.Nodes {
			if err := errors.Join(os.Chmod(s.dir, 0o755), os.Chmod(s.data(), 0o777)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// waitReady polls the nodes' wsrep status until each is ready, Synced, and
// sees a cluster of size members, failing the test after a minute.
func (c *Cluster) waitReady(nodes []*Server, size int) {
	t := c.t
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for _, s := range nodes {
		for {
			st, err := s.wsrepStatus()
			if err == nil && st["wsrep_ready"] == "ON" && st["wsrep_local_state_comment"] == "Synced" &&
				st["wsrep_cluster_size"] == strconv.Itoa(size) {
				break
			}
			select {
			case <-s.exited:
				t.Fatalf("Galera node on port %d exited: %v\n%s", s.port, s.mariadb.ProcessState, s.Logs())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("Galera node on port %d not ready in 60s (want cluster size %d): %v %v\n%s", s.port, size, st, err, s.Logs())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// wsrepStatus reads the node's wsrep_% status variables.
func (s *Server) wsrepStatus() (map[string]string, error) {
	db, _, err := dbqueue.OpenSQL(s.DSN)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS LIKE 'wsrep%'")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	st := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		st[strings.ToLower(k)] = v
	}
	return st, rows.Err()
}

// Status returns node i's wsrep_% status variables (wsrep_local_cert_failures,
// wsrep_local_bf_aborts, …), for tests that report the conflicts they met.
func (c *Cluster) Status(i int) map[string]string {
	c.t.Helper()
	st, err := c.Nodes[i].wsrepStatus()
	if err != nil {
		c.t.Fatalf("wsrep status of node %d: %v", i+1, err)
	}
	return st
}

// NewDB creates a fresh database on the cluster, migrated through node 1
// (DDL replicates to all nodes in total order), and returns it as seen from
// each node: the same tables, one DB per node, each with its own DSN and
// *sql.DB.
func (c *Cluster) NewDB(t testing.TB) []*DB {
	t.Helper()
	name := "dbq_" + randomName()
	var dbs []*DB
	for i, s := range c.Nodes {
		parsed, err := dbqueue.ParseDSN(s.DSN)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			admin := mustOpen(t, "mysql", parsed.Conn)
			exec(t, admin, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
			admin.Close()
		}
		cfg, _ := mysql.ParseDSN(parsed.Conn)
		cfg.DBName = name
		dsn := cfg.FormatDSN()
		parsed, err = dbqueue.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		db := mustOpen(t, parsed.Driver, parsed.Conn)
		t.Cleanup(func() { db.Close() })
		if i == 0 {
			if err := migrations.Up(context.Background(), db, dbqueue.MySQL); err != nil {
				t.Fatalf("migrate on Galera node 1: %v", err)
			}
		}
		dbs = append(dbs, &DB{Dialect: dbqueue.MySQL, DSN: dsn, SQL: db})
	}
	// The other nodes applied the DDL before node 1's statements returned
	// (total order isolation); wait_for_table is a cheap check of that.
	for i, db := range dbs[1:] {
		if err := waitTable(db.SQL, "jobs"); err != nil {
			t.Fatalf("Galera node %d: %v", i+2, err)
		}
	}
	return dbs
}

func waitTable(db *sql.DB, table string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := db.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&n)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
