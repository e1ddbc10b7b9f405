package platform_test

import "testing"

// TestCorpusVirtlet reads Virtlet's own published objects (testdata/corpus/virtlet,
// see corpus_test.go).
func TestCorpusVirtlet(t *testing.T) { runCorpus(t, "virtlet") }
