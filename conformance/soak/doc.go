// Package soak runs the soak when GDR_SOAK asks for it (make soak): every
// rail's RDMA WRITE traffic at the largest GDR_BW_SIZES size and the GPUs'
// copy engines busy at the same time for GDR_SOAK, sampled every
// GDR_SOAK_INTERVAL (harness/soak), then judged over time
// (internal/soak.Judge). The soak runs once per test binary, in the first
// of TestSOAK01..07 to run; each test judges its requirement on that one
// series. Without GDR_SOAK every test skips as not asked (testenv.NotAsked)
// and the report leaves the soak's requirements out of the verdict.
//
// Builds without tags soak nothing but skip; the rdma tag adds the rails'
// traffic, the gpu tag the copy load and NVML.
package soak
