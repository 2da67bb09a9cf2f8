# dbqueue's everyday commands. The database servers are the local ones
# (PostgreSQL on 5432, MariaDB on 3306); override the DSNs to use others.
PG_DSN    ?= postgres://postgres@127.0.0.1:5432/test
MYSQL_DSN ?= root@tcp(127.0.0.1:3306)/test
DSN       ?= sqlite:./queue.db

export DBQUEUE_TEST_POSTGRES_DSN = $(PG_DSN)
export DBQUEUE_TEST_MYSQL_DSN    = $(MYSQL_DSN)

.PHONY: test demo bench compare migrate databases ci

## test: every test, on PostgreSQL, MariaDB and SQLite
test:
	go test ./...

## demo: the quickstart on the embedded SQLite default
demo:
	go run ./examples/quickstart

## bench: the benchmark table (enqueue, work, end-to-end, latency) on all three dialects
bench:
	cd bench && go run ./cmd/dbqbench -pg '$(PG_DSN)' -mysql '$(MYSQL_DSN)'

## compare: dbqueue against River and the hand-written ceilings, side by side
compare:
	cd bench && go run ./cmd/compare -pg '$(PG_DSN)' -mysql '$(MYSQL_DSN)'

## migrate: install the tables on DSN (make migrate DSN=postgres://…)
migrate:
	go run ./cmd/migrate up -dsn '$(DSN)'

## databases: start the local PostgreSQL and MariaDB if they are down
databases:
	pg_isready -q -h 127.0.0.1 || pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql) main start
	mysqladmin -h 127.0.0.1 -u root ping >/dev/null 2>&1 || start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd

## ci: what CI runs
ci:
	bash .ci/run
