package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// term is one term's steps, in the order Redis took them.
type term struct {
	token  string
	worker string
	steps  int
}

// report prints the terms that did the work and how soon the killed leader was replaced,
// and checks that one worker worked at a time, term after term.
func report(ctx context.Context, stdout io.Writer, rdb *redis.Client, cfg workerConfig, w watcher, victim string, killed time.Time, ttl time.Duration) error {
	steps, err := rdb.LRange(ctx, cfg.stepsKey(), 0, -1).Result()
	if err != nil {
		return err
	}
	var terms []term
	for _, s := range steps {
		token, worker, _ := strings.Cut(s, " ")
		if n := len(terms); n > 0 && terms[n-1].token == token {
			terms[n-1].steps++
			continue
		}
		for _, t := range terms {
			if t.token == token {
				return fmt.Errorf("term %s worked again after term %s: two workers worked at once", token, terms[len(terms)-1].token)
			}
		}
		terms = append(terms, term{token: token, worker: worker, steps: 1})
	}
	fmt.Fprintf(stdout, "\nThe work, in the order Redis took it (a step every %v):\n\n", stepEvery)
	fmt.Fprintf(stdout, "%5s  %-10s  %s\n", "term", "worker", "steps")
	for _, t := range terms {
		fmt.Fprintf(stdout, "%5s  %-10s  %d\n", t.token, t.worker, t.steps)
	}
	fmt.Fprintln(stdout)
	for _, c := range w.changes {
		if c.at.After(killed) && c.worker != "" && c.worker != victim {
			fmt.Fprintf(stdout, "%s was killed; %s led %v later (TTL %v): one worker at a time, each term after the last.\n",
				victim, c.worker, c.at.Sub(killed).Round(time.Millisecond), ttl)
			return nil
		}
	}
	return fmt.Errorf("no worker took over from %s after it was killed", victim)
}
