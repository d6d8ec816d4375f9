// Chooses the Downpour loop's Fetcher (worker/fetcher.h) from the training
// section, once, as MakeBackend (worker/backend_factory.h) chooses the compute.
//
//   std::unique_ptr<Fetcher> fetcher = MakeFetcher(context, no_communication);
#ifndef DOWNPOUR_WORKER_FETCHER_FACTORY_H_
#define DOWNPOUR_WORKER_FETCHER_FACTORY_H_

#include <memory>

#include "worker/fetcher.h"

namespace downpour::worker {

// The fetcher of context.training:
//   no_communication       none: each gradient is applied locally with
//                          context.local_learning_rate (no pulls or pushes
//                          after the run's first pull; benchmarks).
//   mode easgd             EasgdFetcher (local steps, elastic exchanges).
//   consistency bsp        AfterPushFetcher, whatever training.fetch says.
//   fetch after_push       AfterPushFetcher.
//   fetch overlap          OverlapFetcher.
//   fetch layerwise        LayerwiseFetcher.
std::unique_ptr<Fetcher> MakeFetcher(const FetchContext& context,
                                     bool no_communication);

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_FETCHER_FACTORY_H_
