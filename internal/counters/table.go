package counters

import "strings"

// Kind says how a counter's rise is judged.
type Kind int

const (
	// Unknown: not in the table. Reported with its delta, never judged: a
	// new driver's counter could mean anything.
	Unknown Kind = iota
	// Error: must not rise while the suite drives traffic.
	Error
	// Corrected: an error the hardware recovered from (a PCIe replay, say).
	// A rise is a warning: no data was lost, but a link that needs
	// recovery during a short test is marginal.
	Corrected
	// Info: rises in normal operation (congestion notifications, flushed
	// completions of a QP being destroyed); reported only.
	Info
	// Data: traffic counters (bytes, packets); they show the traffic
	// happened and are reported only.
	Data
)

func (k Kind) String() string {
	switch k {
	case Error:
		return "error"
	case Corrected:
		return "corrected"
	case Info:
		return "info"
	case Data:
		return "data"
	}
	return "unknown"
}

// Cause is the usual reason behind a rise, for messages and grouping.
type Cause string

const (
	CauseLink       Cause = "cable or optics"          // physical link: bit errors, link retraining, link down
	CausePCIe       Cause = "PCIe signal integrity"    // TLP/DLLP errors, replays, receiver errors on a PCIe link
	CausePCIeProto  Cause = "PCIe protocol or routing" // completion timeouts, unsupported requests, ACS violations
	CauseCongestion Cause = "congestion"               // buffer overruns, discards, ECN/CNP
	CauseRetrans    Cause = "retransmission"           // lost or reordered packets recovered (or not) by RC retries
	CauseRNR        Cause = "receiver not ready"       // RNR NAKs: a SEND found no posted RECV
	CauseTransport  Cause = "transport error"          // remote access or invalid request: keys, lengths, QP state
	CauseConfig     Cause = "fabric configuration"     // partition, VL or constraint mismatches
	CauseInternal   Cause = "device internal error"    // a device's own internal error
	CauseTraffic    Cause = "traffic"                  // data and packet counters
	CauseNone       Cause = "no fault (informational)" // expected in normal operation
	CauseUnknown    Cause = "not known to this suite"  // counter not in the table
)

// Class is what the table says about one counter.
type Class struct {
	Kind    Kind
	Cause   Cause
	Meaning string // what a rise usually means, one line
	// Width is the counter's width in bits when it is narrower than 64:
	// IBTA PortCounters error counters saturate at 2^Width-1 (they stop,
	// they do not wrap), mlx5 Q counters are 32 bits.
	Width int
	// Source of the classification.
	Source string
}

// Sources cited in the table.
const (
	srcIBTA    = "IBTA IB Architecture Specification vol. 1, PortCounters attribute (16.1.3.5); widths from the kernel's drivers/infiniband/core/sysfs.c"
	srcMLX5    = "kernel drivers/infiniband/hw/mlx5/counters.c (Q and congestion counters) and the commits that added them (0ad17a8f7fa0 'IB/mlx5: Add port protocol stats', 58dcb60a226e, b339e0a39dc3)"
	srcRXE     = "kernel drivers/infiniband/sw/rxe/rxe_hw_counters.c and where rxe_comp.c, rxe_resp.c, rxe_net.c increment them (6.1)"
	srcAER     = "PCIe Base Specification, Advanced Error Reporting (6.2, 7.8.4); names as the kernel's drivers/pci/pcie/aer.c prints them"
	srcAERCorr = srcAER + "; correctable errors are recovered by the data link layer without loss"
)

// portTable: ports/<p>/counters (IBTA PortCounters and PortCountersExtended).
var portTable = map[string]Class{
	"symbol_error":                    {Error, CauseLink, "bit errors on the physical lanes: a dirty or damaged cable, connector or transceiver, or a failing port", 16, srcIBTA},
	"link_error_recovery":             {Error, CauseLink, "the link retrained after errors (link error recovery): marginal cable or optics", 8, srcIBTA},
	"link_downed":                     {Error, CauseLink, "the link went down and came back: cable, optics or the switch port", 8, srcIBTA},
	"port_rcv_errors":                 {Error, CauseLink, "malformed packets received (bad CRC, length): physical errors on this link", 16, srcIBTA},
	"port_rcv_remote_physical_errors": {Error, CauseLink, "packets marked bad by another link upstream (EBP): a faulty link elsewhere in the fabric", 16, srcIBTA},
	"port_rcv_switch_relay_errors":    {Error, CauseConfig, "packets a switch port could not relay (routing)", 16, srcIBTA},
	"port_xmit_discards":              {Error, CauseCongestion, "outbound packets discarded (port down or congested, head-of-line timeout)", 16, srcIBTA},
	"port_xmit_constraint_errors":     {Error, CauseConfig, "outbound packets dropped by partition or raw-packet constraints", 8, srcIBTA},
	"port_rcv_constraint_errors":      {Error, CauseConfig, "inbound packets dropped by partition or raw-packet constraints", 8, srcIBTA},
	"local_link_integrity_errors":     {Error, CauseLink, "local physical errors exceeded the link's threshold", 4, srcIBTA},
	"excessive_buffer_overrun_errors": {Error, CauseCongestion, "receive buffer overruns: flow control credits violated (link-level flow control or a marginal link)", 4, srcIBTA},
	"VL15_dropped":                    {Info, CauseNone, "subnet management packets dropped (VL15 is best effort); not data traffic", 16, srcIBTA},
	"port_xmit_wait":                  {Info, CauseCongestion, "ticks with data to send but no credits: congestion downstream, reported only", 32, srcIBTA},
	"port_xmit_data":                  {Data, CauseTraffic, "data octets sent, divided by 4", 0, srcIBTA},
	"port_rcv_data":                   {Data, CauseTraffic, "data octets received, divided by 4", 0, srcIBTA},
	"port_xmit_packets":               {Data, CauseTraffic, "packets sent", 0, srcIBTA},
	"port_rcv_packets":                {Data, CauseTraffic, "packets received", 0, srcIBTA},
	"unicast_xmit_packets":            {Data, CauseTraffic, "unicast packets sent", 0, srcIBTA},
	"unicast_rcv_packets":             {Data, CauseTraffic, "unicast packets received", 0, srcIBTA},
	"multicast_xmit_packets":          {Data, CauseTraffic, "multicast packets sent", 0, srcIBTA},
	"multicast_rcv_packets":           {Data, CauseTraffic, "multicast packets received", 0, srcIBTA},
}

// hwTable: ports/<p>/hw_counters, mlx5 and rxe names. Both drivers define
// duplicate_request and link_downed with the same meaning.
var hwTable = map[string]Class{
	// mlx5 Q counters (32 bits).
	"rx_write_requests":              {Data, CauseTraffic, "RDMA WRITE requests received", 32, srcMLX5},
	"rx_read_requests":               {Data, CauseTraffic, "RDMA READ requests received", 32, srcMLX5},
	"rx_atomic_requests":             {Data, CauseTraffic, "atomic requests received", 32, srcMLX5},
	"rx_dct_connect":                 {Data, CauseTraffic, "DCT connect requests received", 32, srcMLX5},
	"out_of_buffer":                  {Error, CauseRNR, "packets dropped for lack of a posted receive WQE (RNR on the responder)", 32, srcMLX5},
	"out_of_sequence":                {Error, CauseRetrans, "packets received out of sequence: a packet was lost or reordered on the fabric (lossy RoCE without PFC/ECN, a bad link, drops under congestion)", 32, srcMLX5},
	"duplicate_request":              {Error, CauseRetrans, "duplicate requests received: the sender retransmitted packets this side already executed (its ACK was lost or late)", 32, srcMLX5 + "; " + srcRXE},
	"rnr_nak_retry_err":              {Error, CauseRNR, "RNR NAKs received: the peer had no RECV posted; the sender waited and retried", 32, srcMLX5},
	"packet_seq_err":                 {Error, CauseRetrans, "NAK sequence errors received: the peer saw a gap in PSNs (packet loss) and the sender retransmitted", 32, srcMLX5},
	"implied_nak_seq_err":            {Error, CauseRetrans, "READ/atomic responses with a PSN ahead of the expected one: responses were lost and requests retried", 32, srcMLX5},
	"local_ack_timeout_err":          {Error, CauseRetrans, "the ACK timer expired and the sender retransmitted: packets or ACKs lost (or the QP timeout is too short for the fabric)", 32, srcMLX5},
	"resp_local_length_error":        {Error, CauseTransport, "responder local length errors: a message longer than the posted receive buffer", 32, srcMLX5},
	"resp_cqe_error":                 {Error, CauseTransport, "responder completions with error", 32, srcMLX5},
	"req_cqe_error":                  {Error, CauseTransport, "requester completions with error", 32, srcMLX5},
	"req_remote_invalid_request":     {Error, CauseTransport, "remote invalid request NAKs: the peer rejected an operation (opcode, length, QP state)", 32, srcMLX5},
	"req_remote_access_errors":       {Error, CauseTransport, "remote access errors: the peer rejected an rkey, address or access flag (for GPU memory: the registration or the peer-memory path)", 32, srcMLX5},
	"resp_remote_access_errors":      {Error, CauseTransport, "this side rejected a remote access (rkey, address, access flags)", 32, srcMLX5},
	"resp_cqe_flush_error":           {Info, CauseNone, "receive WQEs flushed when a QP moved to error, as when a test destroys a QP with receives still posted", 32, srcMLX5},
	"req_cqe_flush_error":            {Info, CauseNone, "send WQEs flushed when a QP moved to error", 32, srcMLX5},
	"req_transport_retries_exceeded": {Error, CauseRetrans, "transport retries exhausted: the QP failed after repeated loss", 32, srcMLX5},
	"req_rnr_retries_exceeded":       {Error, CauseRNR, "RNR retries exhausted: the QP failed because the peer never posted a receive", 32, srcMLX5},
	"roce_adp_retrans":               {Info, CauseRetrans, "adaptive retransmissions (RoCE accelerated recovery); loss handled in hardware, reported", 32, srcMLX5},
	"roce_adp_retrans_to":            {Info, CauseRetrans, "adaptive retransmission timeouts", 32, srcMLX5},
	"roce_slow_restart":              {Info, CauseCongestion, "slow restarts after retransmission", 32, srcMLX5},
	"roce_slow_restart_cnps":         {Info, CauseCongestion, "CNPs sent during slow restart", 32, srcMLX5},
	"roce_slow_restart_trans":        {Info, CauseCongestion, "transitions into slow restart", 32, srcMLX5},
	"rp_cnp_ignored":                 {Info, CauseCongestion, "congestion notifications received and ignored (RoCE congestion control)", 0, srcMLX5},
	"rp_cnp_handled":                 {Info, CauseCongestion, "congestion notifications handled: the fabric is signalling congestion (ECN), rates were lowered", 0, srcMLX5},
	"np_ecn_marked_roce_packets":     {Info, CauseCongestion, "ECN-marked RoCE packets received: congestion on the path", 0, srcMLX5},
	"np_cnp_sent":                    {Info, CauseCongestion, "congestion notifications sent to the sender", 0, srcMLX5},
	"rx_icrc_encapsulated":           {Error, CauseLink, "RoCE packets with a bad ICRC: corruption on the path", 0, srcMLX5},
	// rxe (64-bit atomic counters).
	"sent_pkts":              {Data, CauseTraffic, "packets sent", 0, srcRXE},
	"rcvd_pkts":              {Data, CauseTraffic, "packets received", 0, srcRXE},
	"out_of_seq_request":     {Error, CauseRetrans, "requests received with a PSN beyond the expected one: a packet was lost and a NAK sent", 0, srcRXE},
	"rcvd_rnr_err":           {Error, CauseRNR, "RNR NAKs received: the peer had no RECV posted", 0, srcRXE},
	"send_rnr_err":           {Error, CauseRNR, "RNR NAKs sent: a SEND arrived with no RECV posted here", 0, srcRXE},
	"rcvd_seq_err":           {Error, CauseRetrans, "NAK sequence errors received: the peer saw a PSN gap (packet loss)", 0, srcRXE},
	"ack_deferred":           {Info, CauseNone, "completer work deferred to a later run (rxe scheduling), not an error", 0, srcRXE},
	"retry_exceeded_err":     {Error, CauseRetrans, "retries exhausted: the QP failed after repeated loss", 0, srcRXE},
	"retry_rnr_exceeded_err": {Error, CauseRNR, "RNR retries exhausted", 0, srcRXE},
	"completer_retry_err":    {Error, CauseRetrans, "the completer retransmitted after a timeout or NAK: packets or ACKs were lost or late", 0, srcRXE},
	"send_err":               {Error, CauseLink, "the netdev refused to send a packet (link down, queue full)", 0, srcRXE},
	"link_downed":            {Error, CauseLink, "the port went down", 0, srcRXE},
	"rdma_sends":             {Data, CauseTraffic, "SEND operations sent", 0, srcRXE},
	"rdma_recvs":             {Data, CauseTraffic, "SEND operations received", 0, srcRXE},
}

// aerCorrectable: aer_dev_correctable.
var aerCorrectable = map[string]Class{
	"RxErr":       {Corrected, CausePCIe, "receiver errors (physical layer): signal integrity of the PCIe link (slot, riser, retimer, card)", 0, srcAERCorr},
	"BadTLP":      {Corrected, CausePCIe, "TLPs with a bad LCRC or sequence number, replayed: PCIe signal integrity", 0, srcAERCorr},
	"BadDLLP":     {Corrected, CausePCIe, "DLLPs with a bad CRC: PCIe signal integrity", 0, srcAERCorr},
	"Rollover":    {Corrected, CausePCIe, "REPLAY_NUM rolled over: the same TLP was replayed four times, the link retrained", 0, srcAERCorr},
	"Timeout":     {Corrected, CausePCIe, "replay timer timeouts: ACKs lost, TLPs replayed", 0, srcAERCorr},
	"NonFatalErr": {Corrected, CausePCIeProto, "advisory non-fatal errors (an uncorrectable error handled as correctable, e.g. an unsupported request the requester tolerated)", 0, srcAERCorr},
	"CorrIntErr":  {Corrected, CauseInternal, "corrected internal errors of the device", 0, srcAERCorr},
	"HeaderOF":    {Corrected, CauseInternal, "the AER header log overflowed (many errors at once)", 0, srcAERCorr},
}

// aerUncorrectable: aer_dev_nonfatal and aer_dev_fatal (same names).
var aerUncorrectable = map[string]Class{
	"Undefined":        {Error, CausePCIeProto, "undefined uncorrectable error", 0, srcAER},
	"DLP":              {Error, CausePCIe, "data link protocol error: the link layer lost sync (signal integrity)", 0, srcAER},
	"SDES":             {Error, CausePCIe, "surprise down: the link went down unexpectedly (card, slot or retimer)", 0, srcAER},
	"TLP":              {Error, CausePCIeProto, "poisoned TLP received: data corrupted upstream (memory or device error)", 0, srcAER},
	"FCP":              {Error, CausePCIe, "flow control protocol error", 0, srcAER},
	"CmpltTO":          {Error, CausePCIeProto, "completion timeout: a read got no answer (the target hung, or P2P was misrouted or blocked)", 0, srcAER},
	"CmpltAbrt":        {Error, CausePCIeProto, "completer abort: the target refused the request", 0, srcAER},
	"UnxCmplt":         {Error, CausePCIeProto, "unexpected completion: a completion no request matched (misrouted P2P, tag mismatch)", 0, srcAER},
	"RxOF":             {Error, CausePCIe, "receiver overflow: flow control credits violated", 0, srcAER},
	"MalfTLP":          {Error, CausePCIeProto, "malformed TLP: e.g. a payload above the receiver's MaxPayload (MPS mismatch on a P2P path)", 0, srcAER},
	"ECRC":             {Error, CausePCIe, "end-to-end CRC error: data corrupted in a switch or bridge", 0, srcAER},
	"UnsupReq":         {Error, CausePCIeProto, "unsupported request: the target does not decode the address (P2P to an unmapped BAR, ACS/IOMMU redirection)", 0, srcAER},
	"ACSViol":          {Error, CausePCIeProto, "ACS violation: a P2P request blocked by Access Control Services", 0, srcAER},
	"UncorrIntErr":     {Error, CauseInternal, "uncorrectable internal error of the device", 0, srcAER},
	"BlockedTLP":       {Error, CausePCIeProto, "MC blocked TLP", 0, srcAER},
	"AtomicOpBlocked":  {Error, CausePCIeProto, "AtomicOp egress blocked", 0, srcAER},
	"TLPBlockedErr":    {Error, CausePCIeProto, "TLP prefix blocked", 0, srcAER},
	"PoisonTLPBlocked": {Error, CausePCIeProto, "poisoned TLP egress blocked", 0, srcAER},
}

// aerTotals are the TOTAL_* lines and the root port totals: sums of the
// named counters (or of errors reported to a root port from below). They
// are judged only when no named counter of the same file explains a rise.
var aerTotals = map[string]Class{
	"TOTAL_ERR_COR":      {Corrected, CausePCIe, "correctable PCIe errors of this function", 0, srcAERCorr},
	"TOTAL_ERR_NONFATAL": {Error, CausePCIeProto, "uncorrectable non-fatal PCIe errors of this function", 0, srcAER},
	"TOTAL_ERR_FATAL":    {Error, CausePCIe, "fatal PCIe errors of this function (the link is unreliable)", 0, srcAER},
	"total_err_cor":      {Corrected, CausePCIe, "correctable errors reported to this root port from the hierarchy below it", 0, srcAERCorr},
	"total_err_nonfatal": {Error, CausePCIeProto, "non-fatal errors reported to this root port from below", 0, srcAER},
	"total_err_fatal":    {Error, CausePCIe, "fatal errors reported to this root port from below", 0, srcAER},
}

// Classify returns the table's entry for k, or an Unknown class.
func Classify(k Key) Class {
	var c Class
	var ok bool
	switch k.Source {
	case Port:
		c, ok = portTable[k.Name]
	case HW:
		// mlx5 in switchdev mode prefixes Q counters of representors.
		c, ok = hwTable[strings.TrimPrefix(k.Name, "vport_")]
	case AER:
		switch {
		case k.Group == AERRootPort || strings.HasPrefix(k.Name, "TOTAL_"):
			c, ok = aerTotals[k.Name]
		case k.Group == AERCorrectable:
			c, ok = aerCorrectable[k.Name]
		case k.Group == AERNonFatal || k.Group == AERFatal:
			c, ok = aerUncorrectable[k.Name]
			if ok && k.Group == AERFatal {
				c.Meaning += " (fatal: the link is unreliable and needs a reset)"
			}
		}
	}
	if !ok {
		return Class{Kind: Unknown, Cause: CauseUnknown, Meaning: "not in this suite's table: reported, not judged"}
	}
	return c
}

// IsTotal reports whether k is a sum of other counters (AER TOTAL_ lines and
// root port totals).
func IsTotal(k Key) bool {
	return k.Source == AER && (k.Group == AERRootPort || strings.HasPrefix(k.Name, "TOTAL_"))
}

// Entry is one row of the table, for documentation and reports.
type Entry struct {
	Source Source
	Group  string
	Name   string
	Class  Class
}

// Table returns every classified counter, by source and name.
func Table() []Entry {
	var out []Entry
	add := func(src Source, group string, m map[string]Class) {
		for n, c := range m {
			out = append(out, Entry{src, group, n, c})
		}
	}
	add(Port, "", portTable)
	add(HW, "", hwTable)
	add(AER, AERCorrectable, aerCorrectable)
	add(AER, AERNonFatal+"|"+AERFatal, aerUncorrectable)
	add(AER, "total", aerTotals)
	sortEntries(out)
	return out
}
