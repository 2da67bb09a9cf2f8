package worker_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/worker"
)

// When one primary is not enough, split the queues across databases: each
// database holds whole queues, pushes go to the database that holds their
// queue, and each database gets workers of its own. Nothing crosses
// databases, so every claim stays a single-server transaction and a push
// can still join the business transaction of the database it lives in.
// Here two SQLite files stand in for two PostgreSQL or MariaDB primaries.
func Example_splitQueuesAcrossDatabases() {
	ctx := context.Background()
	billing, doneBilling := exampleQueue() // holds the "invoices" queue
	defer doneBilling()
	mail, doneMail := exampleQueue() // holds "emails" and "newsletters"
	defer doneMail()

	// The routing table: which database holds which queue. Keep it in
	// one place (configuration), so pushers and workers agree.
	home := map[string]*dbqueue.Queue{
		"invoices":    billing,
		"emails":      mail,
		"newsletters": mail,
	}
	push := func(ctx context.Context, job dbqueue.NewJob) error {
		q, ok := home[job.Queue]
		if !ok {
			return fmt.Errorf("no database holds queue %q: add it to the routing table", job.Queue)
		}
		_, err := q.Push(ctx, job)
		return err
	}
	for _, job := range []dbqueue.NewJob{
		{Name: "send-invoice", Queue: "invoices", Data: 1001},
		{Name: "send-email", Queue: "emails", Data: 7},
		{Name: "send-newsletter", Queue: "newsletters", Data: 12},
	} {
		if err := push(ctx, job); err != nil {
			log.Fatal(err)
		}
	}
	if err := push(ctx, dbqueue.NewJob{Name: "x", Queue: "reports"}); err != nil {
		fmt.Println(err)
	}

	// One worker per database, each reading the queues that database holds.
	var mu sync.Mutex
	var ran []string
	record := func(ctx context.Context, job *dbqueue.Job) error {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, job.Queue+": "+job.Name())
		return nil
	}
	var wg sync.WaitGroup
	for q, queues := range map[*dbqueue.Queue][]string{
		billing: {"invoices"},
		mail:    {"emails", "newsletters"},
	} {
		w, err := worker.New(q, worker.Options{
			Queues:        queues,
			Sleep:         10 * time.Millisecond,
			StopWhenEmpty: true,
			Logger:        slog.New(slog.DiscardHandler),
		})
		if err != nil {
			log.Fatal(err)
		}
		for _, name := range []string{"send-invoice", "send-email", "send-newsletter"} {
			w.Handle(name, record)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Run(ctx); err != nil {
				log.Fatal(err)
			}
		}()
	}
	wg.Wait()

	sort.Strings(ran)
	for _, r := range ran {
		fmt.Println(r)
	}
	// Output:
	// no database holds queue "reports": add it to the routing table
	// emails: send-email
	// invoices: send-invoice
	// newsletters: send-newsletter
}
