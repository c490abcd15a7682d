package soak

import (
	"fmt"
	"time"

	"github.com/gdrconf/gdrconf/internal/counters"
)

// Series builders of the recorded shapes: what the runner writes (one
// sample per interval, counters repeated only when they change, mlxlink
// every few minutes, NVML per GPU), with values of our own making in the
// real tools' units.

var t0 = time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)

func u(v uint64) *uint64 { return &v }

func portKey(dev, name string) counters.Key {
	return counters.Key{Device: dev, Port: 1, Source: counters.Port, Name: name}
}

func hwKey(dev, name string) counters.Key {
	return counters.Key{Device: dev, Port: 1, Source: counters.HW, Name: name}
}

func aerKey(bdf, group, name string) counters.Key {
	return counters.Key{Device: bdf, Source: counters.AER, Group: group, Name: name}
}

// railCounters are the error counters a sample of rail ri starts with, as
// the runner reads them: the port's counters and hw_counters, the AER
// counters of its NIC and GPU.
func railCounters(r Rail) []Count {
	return []Count{
		{portKey(r.Device, "symbol_error"), 0},
		{portKey(r.Device, "link_downed"), 0},
		{portKey(r.Device, "link_error_recovery"), 0},
		{portKey(r.Device, "port_rcv_errors"), 0},
		{portKey(r.Device, "port_xmit_data"), 0},
		{hwKey(r.Device, "out_of_sequence"), 0},
		{hwKey(r.Device, "local_ack_timeout_err"), 0},
		{aerKey(r.PCI, counters.AERCorrectable, "RxErr"), 0},
		{aerKey(r.PCI, counters.AERCorrectable, "TOTAL_ERR_COR"), 0},
		{aerKey(r.GPU, counters.AERNonFatal, "CmpltTO"), 0},
	}
}

// build is a clean run of n rails (each with its GPU) over d, sampled
// every 10 s: every rail at about 371 Gbit/s against a 360 Gbit/s floor,
// ACTIVE, its data counter rising and no error counter; mlxlink every 5
// minutes with no error seen (mlxlink's 15E-255 reads 0) and raw BER
// 2E-9; the GPUs at 1980 MHz, warming from 55 C to 62 C, no throttle
// reason.
func build(n int, d time.Duration) *Series {
	const every = 10 * time.Second
	s := &Series{Version: Version, Host: "gpu-node-07", Start: t0, End: t0.Add(d), Planned: d, Interval: every}
	for i := 0; i < n; i++ {
		floor := 360.0
		s.Rails = append(s.Rails, Rail{Index: i, Device: fmt.Sprintf("mlx5_%d", i), Port: 1,
			PCI: fmt.Sprintf("0000:%02x:00.0", 0x18+0x10*i), GPU: fmt.Sprintf("0000:%02x:00.0", 0x1b+0x10*i),
			Between: []string{fmt.Sprintf("0000:%02x:00.0", 0x16+0x10*i)}, Floor: &floor, FloorSource: "PP-08 floor: 0.9 of the port's payload rate"})
		s.GPUs = append(s.GPUs, GPU{Index: i, PCI: fmt.Sprintf("0000:%02x:00.0", 0x1b+0x10*i), Name: "NVIDIA H200"})
	}
	steps := int(d / every)
	for k := 1; k <= steps; k++ {
		at := t0.Add(time.Duration(k) * every)
		x := Sample{At: at}
		for i, r := range s.Rails {
			rs := RailSample{Gbps: f(371 + float64((k+i)%3)*0.4), State: "ACTIVE"}
			if k == 1 {
				rs.Counters = railCounters(r)
			}
			rs.Counters = append(rs.Counters, Count{portKey(r.Device, "port_xmit_data"), uint64(k) * 11_600_000_000})
			if k == 1 || (at.Sub(t0)%(5*time.Minute)) == 0 {
				rs.Link = &Link{EffectiveBER: f(0), SymbolBER: f(0), RawBER: f(2e-9), TempC: f(48)}
			}
			x.Rails = append(x.Rails, rs)
		}
		for range s.GPUs {
			temp := 55 + 7*float64(k)/float64(steps)
			x.GPUs = append(x.GPUs, GPUSample{SMClockMHz: f(1980), MemClockMHz: f(3201), TempC: f(temp), PowerW: f(480), Throttle: u(0), CopyGbps: f(410)})
		}
		s.Samples = append(s.Samples, x)
	}
	return s
}

// sampleAt is the index of the sample at elapsed time e.
func sampleAt(s *Series, e time.Duration) int {
	for i, x := range s.Samples {
		if x.At.Sub(s.Start) == e {
			return i
		}
	}
	panic(fmt.Sprintf("no sample at %s", e))
}

// setCounter sets counter k of rail ri to v from sample i on (the runner
// repeats a counter only when it changes).
func setCounter(s *Series, ri, i int, k counters.Key, v uint64) {
	cs := s.Samples[i].Rails[ri].Counters
	for j := range cs {
		if cs[j].Key == k {
			cs[j].Value = v
			return
		}
	}
	s.Samples[i].Rails[ri].Counters = append(cs, Count{k, v})
}

// flap makes rail ri's link go down for 5 s every minute, from 0:59.5
// into each minute: the sample on the minute reads DOWN with no rate, the
// samples either side carry the lost time in their rate, link_downed rises
// and the runner records the link's events.
func flap(s *Series, ri int) {
	down := uint64(0)
	for m := time.Minute; m < s.Duration(); m += time.Minute {
		i := sampleAt(s, m)
		s.Samples[i].Rails[ri].State, s.Samples[i].Rails[ri].Gbps = "DOWN", nil
		*s.Samples[i-1].Rails[ri].Gbps *= 0.95
		if i+1 < len(s.Samples) {
			*s.Samples[i+1].Rails[ri].Gbps *= 0.55
		}
		down++
		setCounter(s, ri, i+1, portKey(s.Rails[ri].Device, "link_downed"), down)
		rail := ri
		s.Events = append(s.Events,
			Event{At: s.Start.Add(m - 500*time.Millisecond), Kind: LinkDown, Device: s.Rails[ri].Device, Rail: &rail, Text: "port 1 state DOWN (IBV_EVENT_PORT_ERR)"},
			Event{At: s.Start.Add(m + 4500*time.Millisecond), Kind: LinkUp, Device: s.Rails[ri].Device, Rail: &rail, Text: "port 1 state ACTIVE (IBV_EVENT_PORT_ACTIVE)"})
	}
}
