package platform_test

import "testing"

// TestCorpusVirtlet runs Virtlet's corpus (testdata/corpus/virtlet): its own published
// objects, kept as published; see corpus_test.go for expect.txt.
func TestCorpusVirtlet(t *testing.T) { runCorpus(t, corpusPlatform{Dir: "virtlet"}) }
