// Command hello pushes a typed job and works it: the README's first
// program, kept here so that it runs as a test (main_test.go checks that
// the README shows this file as it is).
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/dbqueue/dbqueue"
	_ "github.com/dbqueue/dbqueue/driver/dbqsqlite" // or dbqpgx, dbqmysql
	"github.com/dbqueue/dbqueue/migrations"
	"github.com/dbqueue/dbqueue/worker"
)

// SendWelcome is a typed job: its kind comes from its type, so the push
// and the handler cannot disagree.
type SendWelcome struct{ Email string }

func (SendWelcome) Kind() string { return "send-welcome" }

func main() {
	ctx := context.Background()
	dsn := "sqlite:./hello.db" // or postgres://…, or user:pass@tcp(host:3306)/db
	check(migrations.UpDSN(ctx, dsn))
	q, err := dbqueue.Open(ctx, dsn)
	check(err)
	defer q.Close()

	_, err = dbqueue.PushArgs(ctx, q, SendWelcome{Email: "ada@example.com"})
	check(err)

	w, err := worker.New(q, worker.Options{StopWhenEmpty: true})
	check(err)
	worker.Register(w, func(ctx context.Context, job *dbqueue.Job, m SendWelcome) error {
		fmt.Println("welcome mail to", m.Email)
		return nil // done: the job is deleted; an error would retry it
	})
	check(w.Run(ctx)) // returns once the queue is empty
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
