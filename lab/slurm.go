package lab

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/lab/vm"
)

// ClusterPackages are the Debian packages the cluster lab adds to the parts
// (one parts folder serves every lab mode): Slurm and munge with their
// libraries (apt-cache depends --no-recommends of slurmd, slurmctld,
// slurm-client, munge and slurm-wlm-basic-plugins), bash for
// deploy/rounds.sh and dist/run.sh (tc's libxtables12 is in Packages).
var ClusterPackages = []string{
	"munge", "libmunge2", "slurmd", "slurmctld", "slurm-client", "slurm-wlm-basic-plugins",
	"libhwloc15", "liblz4-1", "libnuma1", "libpam0g", "libaudit1", "libcap-ng0", "libreadline8", "libbz2-1.0",
	"libgcrypt20", "libgpg-error0", "libdbus-1-3", "libsystemd0", "liblzma5", "libzstd1", "libjson-c5",
	"liblua5.1-0", "libyaml-0-2", "bash", "libtinfo6",
}

// slurmTools are the Slurm and munge binaries of the cluster image (guest
// path -> path inside Parts.Root; clusterTools has the shell's). Debian installs the daemons as
// *-wlm behind alternatives; slurmd starts slurmstepd by its plain name.
var slurmTools = map[string]string{
	"/usr/sbin/munged":     "usr/sbin/munged",
	"/usr/bin/munge":       "usr/bin/munge",
	"/usr/bin/unmunge":     "usr/bin/unmunge",
	"/usr/sbin/slurmctld":  "usr/sbin/slurmctld-wlm",
	"/usr/sbin/slurmd":     "usr/sbin/slurmd-wlm",
	"/usr/sbin/slurmstepd": "usr/sbin/slurmstepd-wlm",
	"/usr/bin/srun":        "usr/bin/srun",
	"/usr/bin/sinfo":       "usr/bin/sinfo",
	"/usr/bin/squeue":      "usr/bin/squeue",
	"/usr/bin/scontrol":    "usr/bin/scontrol",
	"/usr/bin/sbatch":      "usr/bin/sbatch",
}

// SlurmPluginDir is Slurm's PluginDir in Debian's build.
var SlurmPluginDir = "usr/lib/" + vm.AMD64.Multiarch + "/slurm-wlm"

// Users of the cluster image (Debian's uids for slurm and munge).
const (
	SlurmUID = 64030
	MungeUID = 105
)

// slurmPlugins lists the plugins of the unpacked packages, guest path -> host
// path, leaving out those whose libraries the parts do not hold (their
// packages are not among the parts, and slurm.conf never names them).
func slurmPlugins(p *vm.Parts) (map[string]string, []string, error) {
	dir := filepath.Join(p.Root, SlurmPluginDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("slurm plugins: %w", err)
	}
	out := map[string]string{}
	var skipped []string
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".so") {
			continue
		}
		hp := filepath.Join(dir, e.Name())
		if _, _, err := vm.LibClosure([]string{hp}, p.LibDirs(SlurmPluginDir)); err != nil {
			skipped = append(skipped, e.Name())
			continue
		}
		out["/"+SlurmPluginDir+"/"+e.Name()] = hp
	}
	sort.Strings(skipped)
	return out, skipped, nil
}

// SlurmConf is the cluster's slurm.conf: hosts[0] runs slurmctld, every host
// runs slurmd. With gpus > 0 every node has that many GPUs as GRES
// (gres.conf: GresConf) and the steps run under task/cgroup and
// proctrack/cgroup, so that cgroup.conf's ConstrainDevices=yes gives each
// step's tasks a device cgroup that allows only the step's GPUs, as on a GPU
// cluster; without GPUs the plugins are the simplest that work in a VM
// (no cgroups). No accounting; the timeouts allow for TCG's slowness, and
// MinJobAge keeps a finished job in slurmctld for scontrol show job (the
// lab reads its state there: no accounting, no sacct).
func SlurmConf(cluster string, hosts []string, logDir string, gpus int) string {
	proctrack, task, gres, node := "proctrack/linuxproc", "task/none", "", ""
	if gpus > 0 {
		proctrack, task = "proctrack/cgroup", "task/cgroup"
		gres, node = "GresTypes=gpu\n", fmt.Sprintf(" Gres=gpu:%d", gpus)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `# slurm.conf of the gdrconf cluster lab (lab, generated per run)
ClusterName=%s
SlurmctldHost=%s
AuthType=auth/munge
CredType=cred/munge
SlurmUser=slurm
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=%s/slurmctld.log
SlurmdLogFile=%s/slurmd-%%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=%s
TaskPlugin=%s
%sSwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmctldTimeout=120
SlurmdTimeout=300
MessageTimeout=60
BatchStartTimeout=60
InactiveLimit=0
KillWait=10
MinJobAge=300
NodeName=%s CPUs=1%s State=UNKNOWN
PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP
`, cluster, hosts[0], logDir, logDir, proctrack, task, gres, strings.Join(hosts, ","), node)
	return b.String()
}

// GresConf is gres.conf for gpus GPUs per node: their device files, as the
// NVIDIA driver names them (gpudev.go), which slurmd reads at its start
// for the numbers its device cgroup allows or denies. AutoDetect=off:
// Debian's Slurm has no NVML, and the files are the GPUs here.
func GresConf(gpus int) string {
	files := gpuNode("/dev", 0)
	if gpus > 1 {
		files = fmt.Sprintf("/dev/%s[0-%d]", nvidiaNodePrefix, gpus-1)
	}
	return fmt.Sprintf("# gres.conf of the gdrconf cluster lab\nAutoDetect=off\nName=gpu File=%s\n", files)
}

// CgroupConf is cgroup.conf: cgroup/v1, on the hierarchies the agent
// mounts itself (a tmpfs on /sys/fs/cgroup with freezer for
// proctrack/cgroup and devices for task/cgroup), and with GPUs
// ConstrainDevices=yes. slurmd 22.05 loads a cgroup plugin whatever
// slurm.conf says; its cgroup/v2 wants systemd to delegate a cgroup, or
// IgnoreSystemd=yes, "for development and testing" (cgroup.conf(5)).
func CgroupConf(gpus int) string {
	s := "# cgroup.conf of the gdrconf cluster lab\nCgroupPlugin=cgroup/v1\nCgroupAutomount=no\n"
	if gpus > 0 {
		s += "ConstrainDevices=yes\n"
	}
	return s
}

// clusterEtc are the small /etc files every cluster VM shares: users,
// groups, name service and host addresses (the management network).
func clusterEtc(hosts, addrs []string) map[string]vm.DataFile {
	var h strings.Builder
	h.WriteString("127.0.0.1\tlocalhost\n")
	for i, n := range hosts {
		fmt.Fprintf(&h, "%s\t%s\n", addrs[i], n)
	}
	return map[string]vm.DataFile{
		"/etc/hosts": {Mode: 0o644, Bytes: []byte(h.String())},
		"/etc/passwd": {Mode: 0o644, Bytes: []byte(fmt.Sprintf("root:x:0:0:root:/root:/bin/bash\nmunge:x:%d:%d:munge:/nonexistent:/bin/false\nslurm:x:%d:%d:slurm:/nonexistent:/bin/false\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
			MungeUID, MungeUID, SlurmUID, SlurmUID))},
		"/etc/group":         {Mode: 0o644, Bytes: []byte(fmt.Sprintf("root:x:0:\nmunge:x:%d:\nslurm:x:%d:\nnogroup:x:65534:\n", MungeUID, SlurmUID))},
		"/etc/nsswitch.conf": {Mode: 0o644, Bytes: []byte("passwd: files\ngroup: files\nshadow: files\nhosts: files\n")},
		"/etc/shells":        {Mode: 0o644, Bytes: []byte("/bin/sh\n/bin/bash\n")},
	}
}

// slurmBackend is the cluster lab under Slurm (make lab-cluster): the
// daemons run on the VMs (cluster_guest.go), and the controller VM
// submits the batch script as shipped and waits for it (sbatch.go); the
// host reads back what Slurm said of the job.
type slurmBackend struct {
	r   *runner
	job *JobResult // the batch job, once collected
}

func (b *slurmBackend) name() string { return "lab-cluster" }

// packages: Slurm, munge and bash with their libraries (ClusterPackages).
func (*slurmBackend) packages() []string { return ClusterPackages }

// lateOverhead: a LAB_LATE task starts its delay after the others
// (LateTaskProlog).
func (b *slurmBackend) lateOverhead() time.Duration { return 0 }

// setUp has nothing to start on the host: the plan already has the
// controller's device probes and batch job (clusterPlan).
func (b *slurmBackend) setUp(context.Context, []Job, string) (func(), error) { return func() {}, nil }

// image adds Slurm and munge (tools, plugins, configuration, a fresh key)
// and the batch script.
func (b *slurmBackend) image(im *vm.Image, parts *vm.Parts) error {
	r := b.r
	hosts := ClusterHosts(r.o.Cluster.Hosts)
	// Slurm's binaries find libslurmfull.so, and slurmd its plugins, in
	// PluginDir (RUNPATH), so they keep that folder in the image.
	im.PrivateLibDirs = append(im.PrivateLibDirs, SlurmPluginDir)
	if err := addParts(im, parts, slurmTools); err != nil {
		return err
	}
	plugins, skipped, err := slurmPlugins(parts)
	if err != nil {
		return err
	}
	for gp, hp := range plugins {
		im.Binaries[gp] = hp
	}
	r.logf("slurm: %d plugins in the image (%d left out: their libraries are not among the parts)", len(plugins), len(skipped))
	gpus := r.clusterGPUs()
	conf := SlurmConf(clusterName, hosts, clusterLogs, gpus)
	if len(r.live.Late) > 0 {
		// LAB_LATE: a TaskProlog holds the late nodes' tasks; slurm.conf
		// is the site's to write, the batch script stays as shipped.
		conf = withTaskProlog(conf, lateProlog)
		im.Data[lateProlog] = vm.DataFile{Mode: 0o755, Bytes: []byte(LateTaskProlog(r.live.Late))}
	}
	im.Data["/etc/slurm/slurm.conf"] = vm.DataFile{Mode: 0o644, Bytes: []byte(conf)}
	im.Data["/etc/slurm/cgroup.conf"] = vm.DataFile{Mode: 0o644, Bytes: []byte(CgroupConf(gpus))}
	if gpus > 0 {
		im.Data["/etc/slurm/gres.conf"] = vm.DataFile{Mode: 0o644, Bytes: []byte(GresConf(gpus))}
	}
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	// One key per run, in the image only (the run folder is removed by the next run).
	im.Data["/etc/munge/munge.key"] = vm.DataFile{Mode: 0o400, Bytes: key}
	// make dist copies the batch script beside rounds.sh; the lab
	// submits that copy (LAB_SBATCH=old: without its GPU request).
	script, err := r.sbatchScript()
	if err != nil {
		return err
	}
	im.Data[clusterSbatch] = vm.DataFile{Mode: 0o755, Bytes: script}
	return nil
}

// vmConfig: a Slurm node has the switches' NICs and the shared folder only.
func (b *slurmBackend) vmConfig(*vm.Config, []GuestNIC) {}

// drive: the controller VM submits the batch job itself (runSbatch).
func (b *slurmBackend) drive(context.Context, string) (func(), error) { return func() {}, nil }

// collect checks the controller's device probes and reads the batch
// job's result: its folder, as the script named it, is the reports'.
func (b *slurmBackend) collect(plan []Job, vms map[string]*clusterVM, shared string, degrade []Degrade) collected {
	r := b.r
	col := collected{rounds: filepath.Join(shared, "rounds"), found: degrade}
	col.problems = append(col.problems, r.clusterDevices(plan, vms)...)
	job, err := readJobResult(filepath.Join(shared, "lab", "job.json"))
	if err != nil {
		col.problems = append(col.problems, err.Error())
		return col
	}
	b.job = job
	col.rounds = JobFolder(filepath.Join(shared, "submit"), job.JobID)
	if out, err := os.ReadFile(filepath.Join(shared, "submit", "slurm-"+job.JobID+".out")); err == nil {
		_ = os.WriteFile(filepath.Join(r.o.ReportDir, "sbatch.log"), out, 0o644)
	}
	col.json = map[string]any{"job": job, "sbatch": r.sbatchName()}
	return col
}

// checks: the batch job's exit status is the verdict's (SbatchVerdict).
func (b *slurmBackend) checks(sum *ClusterSummary, _ map[string]string, rounds string) []string {
	if b.job == nil {
		return nil
	}
	return SbatchVerdict(b.job, sum.Exit, readExitCode(filepath.Join(rounds, "report")))
}

func (b *slurmBackend) printJob(rounds string) {
	if j := b.job; j != nil {
		fmt.Fprintf(b.r.o.Out, "batch job %s (%s): sbatch --wait exited %d; scontrol: JobState=%s ExitCode=%s; the script's report/exit-code %d\n",
			j.JobID, b.r.sbatchName(), j.SbatchExit, orNone(j.State), orNone(j.ExitCode), readExitCode(filepath.Join(rounds, "report")))
	}
}

func (b *slurmBackend) exited(mergeExit int) string {
	if b.job == nil {
		return mergeExited(mergeExit)
	}
	return fmt.Sprintf("the merge and batch job %s exited %d as they must", b.job.JobID, mergeExit)
}

func (b *slurmBackend) times(t map[string]time.Duration) string {
	return fmt.Sprintf("parts %v, build %v, VMs (boot, Slurm, probes, the batch job) %v, merge %v, total %v",
		t["parts"], t["build"], t["vms"], t["merge"], t["total"])
}
