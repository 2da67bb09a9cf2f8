package dbqueuetest_test

import (
	"context"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/dbqueuetest"
)

// signUp is application code under test: it enqueues a welcome mail.
func signUp(ctx context.Context, q *dbqueue.Queue, email string) error {
	_, err := q.Push(ctx, dbqueue.NewJob{Name: "welcome-mail", Data: map[string]string{"to": email}, Queue: "mail"})
	return err
}

func TestSignUpEnqueuesWelcomeMail(t *testing.T) {
	q := dbqueuetest.New(t)
	if err := signUp(context.Background(), q, "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	pushed := dbqueuetest.Pushed(t, q, "mail")
	if len(pushed) != 1 || pushed[0].Job != "welcome-mail" || string(pushed[0].Data) != `{"to":"ada@example.com"}` {
		t.Fatalf("pushed %+v", pushed)
	}
	if other := dbqueuetest.Pushed(t, q, ""); len(other) != 0 {
		t.Fatalf("%d jobs on the default queue, want none", len(other))
	}
}
