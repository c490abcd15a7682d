// Package jobenv tells a task of an N-host job which task it is, which hosts
// the job has and which job it belongs to, from the variables its engine
// sets: Slurm (srun, one task per node) or a Kubernetes Indexed Job.
//
// The suite never starts tasks itself; the engine does, and every task reads
// the same facts, so every task derives the same schedule.
package jobenv

import (
	"fmt"
	"strconv"
	"strings"
)

// Engine is what started the tasks.
type Engine string

const (
	Slurm      Engine = "slurm"
	Kubernetes Engine = "kubernetes"
)

// Task is one task of a job.
type Task struct {
	Engine Engine
	// Scope and JobID together name the job uniquely among the jobs that can
	// run at the same time: Slurm's cluster name and job ID, or the
	// Kubernetes namespace and the Job's UID (its name when the UID is not
	// given).
	Scope, JobID string
	Step         string // SLURM_STEP_ID, for logs; "" on Kubernetes
	// Attempt tells the attempts of one job ID apart: Slurm's
	// SLURM_RESTART_COUNT of a requeued job ("" for the first attempt). A
	// Kubernetes rerun is a new Job with a new UID, so it needs none.
	Attempt string
	Index   int      // this task's position in Names
	Names   []string // every task's host name in schedule order: report folders, gdr.peer
	Addrs   []string // what a peer dials to reach each task (Names plus a suffix or a DNS domain)
}

// Key is the job's identity for deriving ports and tokens.
func (t Task) Key() string { return string(t.Engine) + "/" + t.Scope + "/" + t.JobID }

// Run is the identity of this attempt of the job: Key, plus the attempt of
// a requeued Slurm job. Every plan and barrier file of the run carries it,
// so that files an earlier attempt left in the same folder never count.
func (t Task) Run() string {
	if t.Attempt == "" {
		return t.Key()
	}
	return t.Key() + "#" + t.Attempt
}

// Self is this task's host name.
func (t Task) Self() string { return t.Names[t.Index] }

// Detect reads Slurm's variables when SLURM_JOB_ID is set, Kubernetes' when
// JOB_COMPLETION_INDEX is; found is false when neither is.
func Detect(lookup func(string) (string, bool), peerSuffix string) (t Task, found bool, err error) {
	if _, ok := lookup("SLURM_JOB_ID"); ok {
		t, err = FromSlurm(lookup, peerSuffix)
		return t, true, err
	}
	if _, ok := lookup("JOB_COMPLETION_INDEX"); ok {
		t, err = FromKubernetes(lookup)
		return t, true, err
	}
	return Task{}, false, nil
}

// need returns a variable that must be set and not empty.
func need(lookup func(string) (string, bool), name, what string) (string, error) {
	v, ok := lookup(name)
	v = strings.TrimSpace(v)
	if !ok || v == "" {
		return "", fmt.Errorf("%s is not set: %s", name, what)
	}
	return v, nil
}

// index parses a task index or count, naming the variable on error.
func number(name, v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s=%q is not valid: want a whole number from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

// unique rejects a host list naming a host twice: one task per host.
func unique(name string, hosts []string) error {
	seen := make(map[string]int, len(hosts))
	for i, h := range hosts {
		if j, ok := seen[h]; ok {
			return fmt.Errorf("%s names %s twice (positions %d and %d): the suite runs one task per node", name, h, j, i)
		}
		seen[h] = i
	}
	return nil
}
