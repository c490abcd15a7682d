package lab

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/gdrconf/gdrconf/report"
)

// Network plan inside the lab: one /24 of the benchmarking range.
const (
	ServerIP    = "198.18.0.1"
	ClientIP    = "198.18.0.2"
	NetMask     = 24
	BarrierPort = 7471
	RXEDevice   = "rxe0"
)

// Step is one command the guest agent runs.
type Step struct {
	ID      string        `json:"id"`      // unique in the job; names output records
	Host    string        `json:"host"`    // report label: server, client or loopback
	Pkg     string        `json:"pkg"`     // report package: conformance/pingpong or perftest
	Kind    string        `json:"kind"`    // "gotest" (output is -test.v=test2json) or "tool"
	Argv    []string      `json:"argv"`    // absolute path first
	Env     []string      `json:"env"`     // added to the agent's base environment
	Timeout time.Duration `json:"timeout"` // the step is killed after this
	Barrier bool          `json:"barrier"` // meet the peer VM before starting
	Delay   time.Duration `json:"delay"`   // sleep after the barrier (a client waiting for a server to listen)
	// Faults are what the agent does to its VM meanwhile (lab-faults).
	Faults []Fault `json:"faults,omitempty"`
	// KillWait, when set, is how long the agent waits after the command
	// ended for the rest of its process group to end before it kills
	// them, as slurmstepd waits KillWait between a step's SIGTERM and its
	// SIGKILL: a signalled child (the soak winding down) finishes instead
	// of dying with the VM.
	KillWait time.Duration `json:"kill_wait,omitempty"`
}

// Job is what one VM runs, in order, after its network and rxe0 are up.
type Job struct {
	Role    string        `json:"role"` // server or client
	Addr    string        `json:"addr"` // this VM's IPv4 address
	Peer    string        `json:"peer"` // the other VM's address
	Modules []string      `json:"modules"`
	Setup   time.Duration `json:"setup"` // deadline for modules, network and rxe0 ACTIVE
	// GPUs is how many emulated GPUs the VM has: the agent makes their
	// device files (/dev/nvidiactl, /dev/nvidia<i>) in its setup, which
	// the emulated libcuda.so.1 opens as the driver does (gpudev.go).
	GPUs int `json:"gpus,omitempty"`
	// NICs, when set, replace eth0: one NIC per entry, found by its MAC,
	// each with its address and rxe device (make lab-soak's rails and its
	// management network; Addr is then the management address).
	NICs  []GuestNIC `json:"nics,omitempty"`
	Steps []Step     `json:"steps"`
	// Key names the job in an image that holds several (lab-faults: one
	// pair per case), chosen by lab.job= on the kernel command line; "" is
	// Role's job.
	Key string `json:"key,omitempty"`
	// Cluster, when set, makes the VM a node of the cluster lab
	// (cluster_guest.go) instead of a host of the two-VM lab.
	Cluster *ClusterJob `json:"cluster,omitempty"`
}

// JobJSON is j as the image writes it (vm.Job): /lab/job-<role>.json, with
// the modules' guest paths in load order.
func (j Job) JobJSON(modules []string) ([]byte, error) {
	j.Modules = modules
	return json.MarshalIndent(j, "", " ")
}

// Record types written by the guest on its result port (ttyS1), one per
// line: "GDRLAB <type> <step> <base64 payload>". Base64 keeps the stream
// immune to tty translation; the prefix lets the reader skip anything else.
const (
	RecBegin = "B" // payload: JSON Step
	RecData  = "D" // payload: raw output bytes
	RecEnd   = "E" // payload: JSON StepEnd
	RecLog   = "L" // payload: agent log line (step "-")
	RecDone  = "X" // the agent finished every step
	// RecIdentity (step "-"): JSON report.Identity as the VM's agent
	// collected it after setup (kernel, modules, NICs, DMI, rdma-core: the
	// inventory a report carries), so that the lab's reports describe the
	// VMs from inside as a host's own report would.
	RecIdentity = "I"
)

const recPrefix = "GDRLAB "

// StepEnd closes a step.
type StepEnd struct {
	RC       int           `json:"rc"`
	Duration time.Duration `json:"duration"`
	Err      string        `json:"err,omitempty"` // why it did not run or was killed
}

// RecordWriter frames records onto w; safe for concurrent use.
type RecordWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewRecordWriter frames records onto w.
func NewRecordWriter(w io.Writer) *RecordWriter { return &RecordWriter{w: w} }

// Write emits one record.
func (r *RecordWriter) Write(typ, step string, payload []byte) error {
	if step == "" || strings.ContainsAny(step, " \n") {
		return fmt.Errorf("record step id %q must be non-empty without blanks", step)
	}
	line := recPrefix + typ + " " + step + " " + base64.StdEncoding.EncodeToString(payload) + "\n"
	r.mu.Lock()
	defer r.mu.Unlock()
	_, err := io.WriteString(r.w, line)
	return err
}

// StepOutput returns an io.Writer whose bytes become data records of step,
// in chunks small enough to keep a killed VM's last output.
func (r *RecordWriter) StepOutput(step string) io.Writer { return stepWriter{r, step} }

type stepWriter struct {
	r    *RecordWriter
	step string
}

func (s stepWriter) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += 3072 {
		end := min(off+3072, len(p))
		if err := s.r.Write(RecData, s.step, p[off:end]); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

// StepResult is what the host learned about one step.
type StepResult struct {
	Step   Step
	Output []byte
	End    *StepEnd // nil: the step never finished (VM died or hung)
}

// Results is the parsed result stream of one VM.
type Results struct {
	Steps    []*StepResult
	Log      []string
	Done     bool
	Identity *report.Identity // nil: the agent sent none (setup failed, or an older agent)
}

// Step returns the result for id, or nil.
func (r *Results) Step(id string) *StepResult {
	for _, s := range r.Steps {
		if s.Step.ID == id {
			return s
		}
	}
	return nil
}

// ParseRecords reads a result stream; lines that are not records (or are
// cut short by a killed VM) are skipped.
func ParseRecords(rd io.Reader) (*Results, error) {
	res := &Results{}
	byID := map[string]*StepResult{}
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		i := strings.Index(line, recPrefix)
		if i < 0 {
			continue
		}
		f := strings.Fields(line[i+len(recPrefix):])
		if len(f) < 2 {
			continue
		}
		var payload []byte
		if len(f) >= 3 {
			b, err := base64.StdEncoding.DecodeString(f[2])
			if err != nil {
				continue // a torn line from a killed VM
			}
			payload = b
		}
		typ, id := f[0], f[1]
		switch typ {
		case RecBegin:
			var st Step
			if err := json.Unmarshal(payload, &st); err != nil {
				continue
			}
			sr := &StepResult{Step: st}
			byID[id] = sr
			res.Steps = append(res.Steps, sr)
		case RecData:
			if sr := byID[id]; sr != nil {
				sr.Output = append(sr.Output, payload...)
			}
		case RecEnd:
			var e StepEnd
			if sr := byID[id]; sr != nil && json.Unmarshal(payload, &e) == nil {
				sr.End = &e
			}
		case RecLog:
			res.Log = append(res.Log, string(payload))
		case RecDone:
			res.Done = true
		case RecIdentity:
			var id report.Identity
			if json.Unmarshal(payload, &id) == nil {
				res.Identity = &id
			}
		}
	}
	return res, sc.Err()
}
