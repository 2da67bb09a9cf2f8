package periodic_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/dbqueue/dbqueue"
	_ "github.com/dbqueue/dbqueue/driver/dbqsqlite"
	"github.com/dbqueue/dbqueue/migrations"
	"github.com/dbqueue/dbqueue/periodic"
)

// Keep a schedule in every process that opens the queue: each tick is
// pushed once, whichever process gets there first.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 3500*time.Millisecond)
	defer cancel()
	dir, err := os.MkdirTemp("", "dbqueue")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dsn := "sqlite:" + filepath.Join(dir, "queue.db")
	if err := migrations.UpDSN(ctx, dsn); err != nil {
		log.Fatal(err)
	}

	jobs := []periodic.Job{{
		Name:     "heartbeat",
		Schedule: periodic.Every(time.Second), // or periodic.MustCron("*/5 * * * *")
		New: func(tick time.Time) dbqueue.NewJob {
			return dbqueue.NewJob{Name: "heartbeat", Data: tick.Unix()}
		},
	}}
	// Two "processes": two queues, each with its own scheduler.
	done := make(chan struct{})
	for range 2 {
		q, err := dbqueue.Open(ctx, dsn)
		if err != nil {
			log.Fatal(err)
		}
		defer q.Close()
		s, err := periodic.New(q, jobs, periodic.Options{})
		if err != nil {
			log.Fatal(err)
		}
		go func() { _ = s.Run(ctx); done <- struct{}{} }()
	}
	<-done
	<-done

	q, err := dbqueue.Open(context.Background(), dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	pushed, err := q.Reserve(context.Background(), 100)
	if err != nil {
		log.Fatal(err)
	}
	ticks := map[string]bool{}
	for _, j := range pushed {
		ticks[string(j.Payload.Data)] = true
	}
	fmt.Println("ticks pushed twice:", len(pushed)-len(ticks))
	fmt.Println("at least two ticks:", len(ticks) >= 2)
	// Output:
	// ticks pushed twice: 0
	// at least two ticks: true
}

// Every ticks at the multiples of its interval since the Unix epoch, so
// every process agrees on the ticks without talking to the others.
func ExampleEvery() {
	s := periodic.Every(15 * time.Minute)
	now := time.Date(2026, 3, 1, 10, 7, 30, 0, time.UTC)
	fmt.Println(s.Next(now).Format(time.TimeOnly))
	cron := periodic.MustCron("0 3 * * *")
	fmt.Println(cron.Next(now).Format(time.DateTime))
	// Output:
	// 10:15:00
	// 2026-03-02 03:00:00
}
