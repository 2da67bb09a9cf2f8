package worker

import (
	"fmt"
	"testing"
)

// Over every round of W claims (W the sum of the weights) each queue
// comes first exactly its weight of times, never in a run longer than its
// share needs, and paused queues drop out of the round.
func TestWeightsShareClaimsExactly(t *testing.T) {
	w := newWeights(Options{Queues: []string{"a", "b", "c"}, QueueWeights: map[string]int{"a": 5, "b": 3, "c": 2}})
	all := []string{"a", "b", "c"}
	firsts := map[string]int{}
	run, longest, last := 0, 0, ""
	for i := range 10 * 1000 {
		order := w.order(all)
		if len(order) != 3 {
			t.Fatalf("claim %d reads %v: every queue must follow", i, order)
		}
		firsts[order[0]]++
		if order[0] == last {
			run++
		} else {
			run, last = 1, order[0]
		}
		longest = max(longest, run)
		if (i+1)%10 == 0 && (firsts["a"] != 5*(i+1)/10 || firsts["b"] != 3*(i+1)/10 || firsts["c"] != 2*(i+1)/10) {
			t.Fatalf("after %d claims the first queues were %v, want exactly 5:3:2", i+1, firsts)
		}
	}
	if longest > 2 {
		t.Errorf("a queue came first %d claims in a row; weights 5:3:2 need at most 2", longest)
	}

	// b paused: a and c share 5:2.
	firsts = map[string]int{}
	for range 700 {
		order := w.order([]string{"a", "c"})
		if fmt.Sprint(order) != "[a c]" && fmt.Sprint(order) != "[c a]" {
			t.Fatalf("paused b is read: %v", order)
		}
		firsts[order[0]]++
	}
	if firsts["a"] < 499 || firsts["a"] > 501 || firsts["c"] < 199 || firsts["c"] > 201 {
		t.Fatalf("a and c alone came first %v times in 700 claims, want 500:200", firsts)
	}

	if got := newWeights(Options{Queues: []string{"x"}}); got != nil || fmt.Sprint(got.order([]string{"x", "y"})) != "[x y]" {
		t.Fatalf("no weights must keep strict priority")
	}
	// A queue of Queues without a weight weighs 1.
	w = newWeights(Options{Queues: []string{"a", "b"}, QueueWeights: map[string]int{"a": 2}})
	firsts = map[string]int{}
	for range 30 {
		firsts[w.order([]string{"a", "b"})[0]]++
	}
	if firsts["a"] != 20 || firsts["b"] != 10 {
		t.Fatalf("a:2 with unweighted b came first %v, want 20:10", firsts)
	}
}

func TestWeightsValidate(t *testing.T) {
	for _, o := range []Options{
		{QueueWeights: map[string]int{"a": 0}},
		{QueueWeights: map[string]int{"a": -1}},
		{Queues: []string{"a"}, QueueWeights: map[string]int{"b": 1}},
	} {
		if err := o.withDefaults().validate(90e9); err == nil {
			t.Errorf("options %+v accepted", o.QueueWeights)
		}
	}
	if got := weightedQueues(map[string]int{"low": 1, "high": 5, "mid": 1}); fmt.Sprint(got) != "[high low mid]" {
		t.Errorf("weighted queues in order %v", got)
	}
}
