package platform_test

import "testing"

// TestCorpusKubeVirt runs KubeVirt's corpus (testdata/corpus/kubevirt): its own published
// objects, kept as published; see corpus_test.go for expect.txt.
func TestCorpusKubeVirt(t *testing.T) { runCorpus(t, corpusPlatform{Dir: "kubevirt"}) }
