// Package gpucopy is the engine of the GPU copy checks (GPU-09..15): timed
// pinned host<->GPU copies, alone and on every GPU at once with the analysis
// of who shares an uplink, and GPU<->GPU peer copies one way and both ways
// with the link they are held against. It measures, records and explains;
// conformance/gpu judges. The parts that drive a GPU need build tag gpu
// (harness/cuda); the link and sharing texts build without it.
package gpucopy
