// Package client is the Go client of Spindle's parameter server, for
// Spindle's Go trainers: declare tables, pull rows and push gradients by
// key, batched per server and sent to all servers at once, and advance the
// worker's clock after each step.
//
//	c, err := client.FromRanks(ranks, logger) // in a job run with --num-ps; ranks from task.Env
//	defer c.Close(ctx)
//	c.Declare(ctx, &ps.TableSpec{Name: "emb", Dim: 16, Optimizer: &pspb.Optimizer{Kind: ps.AdaGrad, LearningRate: 0.05}})
//	for ... {
//		c.Pull(ctx, "emb", keys, rows)  // waits as the job's staleness bound asks
//		... compute grads ...
//		c.Push(ctx, "emb", keys, grads)
//		c.Clock(ctx)
//	}
//
// When the job's data link is UCX (SPINDLE_COLLECTIVE_LINK, Config.DataLink),
// pulls and pushes go over UCX to every server that offers it, in a
// session opened over the server's gRPC connection; the rest of the
// protocol stays on gRPC, and errors and retries are the same.
package client
