package reqs

// causeRemedies are what to do about the root causes whose messages name
// what is absent but not how to get it (a skip's "no NVIDIA GPU: ..."): the
// report shows these beside the cause. Keyed by the cause's leading "no
// <thing>" phrase, as the report groups causes.
var causeRemedies = map[string]string{
	"no NVIDIA GPU": "run the suite on a host with an NVIDIA data-center GPU on its PCI bus (vendor 0x10de, class 0x03); " +
		"in a VM pass the GPU through (VFIO), in a container give it the GPU and the host's /sys (GDR_HOST_ROOT)",
	"no NVIDIA driver": "install and load the NVIDIA data-center driver (distribution packages or NVIDIA's runfile: " +
		"/proc/driver/nvidia/version then exists and nvidia-smi lists the GPUs); on a host without an NVIDIA GPU, run the suite on one that has it",
}

// CauseRemedy is the remedy for a root cause named by its "no <thing>"
// phrase (e.g. "no NVIDIA GPU"), or "" when the cause's messages carry their own.
func CauseRemedy(cause string) string { return causeRemedies[cause] }
