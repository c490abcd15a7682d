package jobenv

import (
	"fmt"
	"strconv"
)

// Variables a pod of the Indexed Job carries (deploy/k8s sets them; the
// Job controller sets JOB_COMPLETION_INDEX itself).
const (
	EnvIndex       = "JOB_COMPLETION_INDEX" // this pod's index, 0..completions-1
	EnvCompletions = "GDR_K8S_COMPLETIONS"  // the Job's spec.completions (the downward API cannot expose it)
	EnvJobName     = "GDR_K8S_JOB_NAME"     // label batch.kubernetes.io/job-name, via the downward API
	EnvJobUID      = "GDR_K8S_JOB_UID"      // label batch.kubernetes.io/controller-uid, via the downward API
	EnvService     = "GDR_K8S_SERVICE"      // the headless Service, equal to the pod template's subdomain
	EnvNamespace   = "GDR_K8S_NAMESPACE"    // metadata.namespace, via the downward API
)

// FromKubernetes reads a pod of an Indexed Job with a headless Service. Pod
// i's stable host name is <job>-<i> and its address <job>-<i>.<service>
// (resolvable in the pod's namespace through the DNS search path). The job
// is named by its UID when given: a Job re-created under the same name is
// then a different job.
func FromKubernetes(lookup func(string) (string, bool)) (Task, error) {
	t := Task{Engine: Kubernetes}
	idx, err := need(lookup, EnvIndex, "not a pod of an Indexed Job (completionMode: Indexed)")
	if err != nil {
		return t, err
	}
	comp, err := need(lookup, EnvCompletions, "the Job's manifest must set it to spec.completions (deploy/k8s does)")
	if err != nil {
		return t, err
	}
	n, err := number(EnvCompletions, comp, 1, MaxTasks)
	if err != nil {
		return t, err
	}
	if t.Index, err = number(EnvIndex, idx, 0, n-1); err != nil {
		return t, fmt.Errorf("%w (%s=%d)", err, EnvCompletions, n)
	}
	job, err := need(lookup, EnvJobName, "set it from the label batch.kubernetes.io/job-name (downward API)")
	if err != nil {
		return t, err
	}
	svc, err := need(lookup, EnvService, "set it to the headless Service's name, the pod template's subdomain")
	if err != nil {
		return t, err
	}
	for _, c := range []struct{ name, v string }{{EnvJobName, job}, {EnvService, svc}} {
		if !dnsLabel(c.v) {
			return t, fmt.Errorf("%s=%q is not valid: want a DNS label (lower-case letters, digits, '-', at most 63)", c.name, c.v)
		}
	}
	if last := job + "-" + strconv.Itoa(n-1); len(last) > 63 {
		return t, fmt.Errorf("%s=%q: pod host name %q is longer than 63 characters: shorten the Job's name", EnvJobName, job, last)
	}
	t.Scope, _ = lookup(EnvNamespace)
	t.JobID = job
	if uid, ok := lookup(EnvJobUID); ok && uid != "" {
		t.JobID = uid
	}
	t.Names = make([]string, n)
	t.Addrs = make([]string, n)
	for i := range n {
		t.Names[i] = fmt.Sprintf("%s-%d", job, i)
		t.Addrs[i] = t.Names[i] + "." + svc
	}
	return t, nil
}

func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
