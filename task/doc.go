// Package task is what a Go training program sees of Spindle: the
// environment the executor started it with (its rank, the world size, its
// peers, its checkpoint directory) and its data feed.
//
// A training program reads its environment once, then its epochs:
//
//	env, err := task.FromEnv()
//	if err != nil {
//		log.Fatal(err)
//	}
//	err = env.TensorEpochs(ctx, func(ep *wire.TensorEpoch) error {
//		for {
//			b, err := ep.Next(ctx)
//			if errors.Is(err, io.EOF) {
//				return nil
//			}
//			if err != nil {
//				return err
//			}
//			train(b.Features, b.Labels) // b.Rows rows of ep.NumFeatures() values
//		}
//	})
//
// With the arrow feed, Env.ArrowEpochs hands out Arrow record batches
// instead; with the direct feed, Env.Direct says which splits to read. The
// formats are documented in docs/feed-protocol.md.
//
// A trainer that allreduces with Spindle's collectives (Env.Comm) can
// outlive a lost rank that the job replaces alone
// (spindle.failure.replaceWorkers): Env.Rejoin waits for the replacement
// and rejoins it in place, and CatchUp hands every rank the state of the
// rank that got furthest (docs/reliability.md). When the membership names
// a smaller world instead (the lost rank is not replaced), Env.Rejoin forms
// it with the same processes (collective's Comm.Shrink), renumbered.
package task
