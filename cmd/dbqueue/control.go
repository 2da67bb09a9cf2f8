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
	queue, err := oneArg(cmd, "queue name", rest)
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
		fmt.Fprintf(c.out, "paused queue %q: workers take no more jobs from it until resume\n", queue)
		return nil
	}
	if err := q.Resume(ctx, queue); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "resumed queue %q\n", queue)
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
	queue, err := oneArg("clear", "queue name", rest)
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
		fmt.Fprintf(c.out, "This deletes all %d jobs of queue %q (%d pending, %d delayed, %d reserved); failed jobs stay.\n",
			s.Total(), queue, s.Pending, s.Delayed, s.Reserved)
		fmt.Fprint(c.out, "Type the queue name to confirm: ")
		line, err := bufio.NewReader(c.in).ReadString('\n')
		if err != nil {
			fmt.Fprintln(c.out)
		}
		if strings.TrimSpace(line) != queue {
			return fmt.Errorf("clear: not confirmed; queue %q left as it was", queue)
		}
	}
	n, err := q.Clear(ctx, queue)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "deleted %d jobs of queue %q\n", n, queue)
	return nil
}
