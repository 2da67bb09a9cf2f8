package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"
)

func (c *cli) pauseResume(ctx context.Context, cmd string, args []string) error {
	rest, err := parse(newFlagSet(c, cmd), args)
	if err != nil {
		return err
	}
	queue, err := queueArg(cmd, rest)
	if err != nil {
		return err
	}
	q, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer q.Close()
	if cmd == "pause" {
		if err := q.Pause(ctx, queue); err != nil {
			return err
		}
		fmt.Fprintf(c.out, "paused queue \"%s\": workers take no more jobs from it until resume\n", printable(queue))
		return nil
	}
	if err := q.Resume(ctx, queue); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "resumed queue \"%s\"\n", printable(queue))
	return nil
}

func (c *cli) restart(ctx context.Context, args []string) error {
	rest, err := parse(newFlagSet(c, "restart"), args)
	if err != nil {
		return err
	}
	if err := noArgs("restart", rest); err != nil {
		return err
	}
	q, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer q.Close()
	if err := q.Restart(ctx); err != nil {
		return err
	}
	fmt.Fprintln(c.out, "restart broadcast: every worker stops after its current jobs (its supervisor starts it again)")
	return nil
}

func (c *cli) clear(ctx context.Context, args []string) error {
	fs := newFlagSet(c, "clear")
	force := fs.Bool("force", false, "clear without asking")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	queue, err := queueArg("clear", rest)
	if err != nil {
		return err
	}
	if !*force && !c.inTTY {
		return usagef("clear: refusing to delete the jobs of queue %q without -force: stdin is not a terminal to confirm on", queue)
	}
	q, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer q.Close()
	if !*force {
		s, err := q.Size(ctx, queue)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.out, "This deletes all %d jobs of queue \"%s\" (%d pending, %d delayed, %d reserved); failed jobs stay.\n",
			s.Total(), printable(queue), s.Pending, s.Delayed, s.Reserved)
		fmt.Fprint(c.out, "Type the queue name to confirm: ")
		line, err := bufio.NewReader(c.in).ReadString('\n')
		if err != nil {
			fmt.Fprintln(c.out)
		}
		if !confirms(line, queue) {
			return fmt.Errorf("clear: not confirmed; queue \"%s\" left as it was", printable(queue))
		}
	}
	n, err := q.Clear(ctx, queue)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "deleted %d jobs of queue \"%s\"\n", n, printable(queue))
	return nil
}

// queueArg is the one queue a command acts on. An empty name is refused:
// the library reads "" as the default queue, so an unset shell variable
// (dbqueue clear "$Q") would otherwise act on the default queue, and
// pressing Enter at clear's prompt would "type" that empty name.
func queueArg(cmd string, rest []string) (string, error) {
	queue, err := oneArg(cmd, "queue name", rest)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(queue) == "" {
		return "", usagef("%s: empty queue name: name the queue, e.g. dbqueue %s default", cmd, cmd)
	}
	return queue, nil
}

// confirms reports whether the line typed at clear's prompt is the queue's
// name: as typed, or without the spaces around it.
func confirms(line, queue string) bool {
	typed := strings.TrimRight(line, "\r\n")
	return typed != "" && (typed == queue || strings.TrimSpace(typed) == queue)
}
