package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
)

// auc is the area under the ROC curve of scores for labels: the chance
// that a random positive scores above a random negative (ties count half).
func auc(scores []float64, labels []float32) float64 {
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return scores[idx[a]] < scores[idx[b]] })
	var pos, neg, rankSum float64
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && scores[idx[j]] == scores[idx[i]] {
			j++
		}
		mid := float64(i+j+1) / 2 // the average 1-based rank of the tie
		for _, k := range idx[i:j] {
			if labels[k] == 1 {
				rankSum += mid
				pos++
			} else {
				neg++
			}
		}
		i = j
	}
	if pos == 0 || neg == 0 {
		return math.NaN()
	}
	return (rankSum - pos*(pos+1)/2) / (pos * neg)
}

// logloss is the mean negative log-likelihood of probabilities p.
func logloss(p []float64, labels []float32) float64 {
	sum := 0.0
	for i, pi := range p {
		pi = math.Min(math.Max(pi, 1e-7), 1-1e-7)
		if labels[i] == 1 {
			sum -= math.Log(pi)
		} else {
			sum -= math.Log(1 - pi)
		}
	}
	return sum / float64(len(p))
}

// sampleRows is how many held-out rows --scores-out records.
const sampleRows = 100

// scoreSample is held-out rows with the trained model's scores of them.
type scoreSample struct {
	IDs    [][]uint64 `json:"ids"`
	Scores []float64  `json:"scores"`
}

// write saves the sample as JSON at path (a local file).
func (s scoreSample) write(path string) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("--scores-out: %w", err)
	}
	return nil
}
