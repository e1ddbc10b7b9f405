// Package lib holds no code: its subpackages are the leaves of vminit's
// package graph, small helpers every layer may share (atomic files,
// bounded gzip and YAML, HTTP server limits, QEMU probing, systemd unit
// text…).
//
// The rule that keeps them leaves: a package under internal/lib imports
// the standard library, third-party modules and other internal/lib
// packages, never another vminit package (spec, the renderers, the
// server…). A helper that needs the spec belongs above it, with its
// callers; systemd.Mount, which a spec.Mount converts to, is how
// internal/lib/systemd renders mount units without knowing the spec.
// Tests may also use the harnesses under internal/testing.
// TestLeaves enforces the rule.
package lib
