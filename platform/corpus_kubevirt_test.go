package platform_test

import "testing"

// TestCorpusKubeVirt reads KubeVirt's own published objects (testdata/corpus/kubevirt,
// see corpus_test.go).
func TestCorpusKubeVirt(t *testing.T) { runCorpus(t, "kubevirt") }
