# Downpour worker image on NVIDIA's CUDA runtime image (cuBLAS, cudart). Build
# from the repository root:
#   docker build -f deploy/docker/worker.Dockerfile -t downpour/worker-cuda:0.1.0 .
# Run with the NVIDIA container toolkit (docker run --gpus 1 ...) and --index N;
# without a GPU, compute.device: auto falls back to the CPU.
#
# The build stage is Debian 12 (the platform the project builds on) with NVIDIA's
# CUDA compiler and cuBLAS from NVIDIA's Debian 12 repository; the binary and its
# non-CUDA libraries then run on the Ubuntu-based CUDA runtime image (its glibc is
# newer than Debian 12's, so they load there).
ARG CUDA_MAJOR_MINOR=13-0
ARG CUDA_RUNTIME_IMAGE=nvidia/cuda:13.0.0-runtime-ubuntu24.04

FROM debian:12 AS build
ARG CUDA_MAJOR_MINOR
WORKDIR /src
COPY deploy/install_deps.sh deploy/install_deps.sh
RUN ./deploy/install_deps.sh \
 && apt-get install -y --no-install-recommends wget \
 && wget -q https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb \
 && dpkg -i cuda-keyring_1.1-1_all.deb && rm cuda-keyring_1.1-1_all.deb \
 && apt-get update -qq \
 && apt-get install -y --no-install-recommends \
      cuda-nvcc-${CUDA_MAJOR_MINOR} cuda-cudart-dev-${CUDA_MAJOR_MINOR} \
      libcublas-dev-${CUDA_MAJOR_MINOR}
COPY . .
# The data set ships in the image (data.path: /opt/downpour/data/mnist).
RUN ./deploy/fetch_mnist.sh /out/data/mnist \
 && CUDA_PATH=/usr/local/cuda-$(echo ${CUDA_MAJOR_MINOR} | tr - .) \
    bazel build //worker:ps_worker //tools:psctl \
 && mkdir -p /out/bin /out/lib \
 && cp bazel-bin/worker/ps_worker bazel-bin/tools/psctl /out/bin/ \
 && ldd /out/bin/* | awk '/=> \// {print $3}' | sort -u \
    | grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcublas[^/]*|libcudart)\.so' \
    | xargs -r cp -L -t /out/lib/

FROM ${CUDA_RUNTIME_IMAGE}
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/downpour downpour \
 && mkdir -p /var/lib/downpour && chown downpour:downpour /var/lib/downpour
COPY --from=build /out/ /opt/downpour/
ENV LD_LIBRARY_PATH=/opt/downpour/lib
USER downpour
WORKDIR /var/lib/downpour
EXPOSE 7100
# --config: with security.tls on, the check speaks TLS like every client.
HEALTHCHECK --interval=10s --timeout=5s \
  CMD ["/opt/downpour/bin/psctl", "health", "--address", "127.0.0.1:7100", "--config", "/etc/downpour/cluster.yaml"]
ENTRYPOINT ["/opt/downpour/bin/ps_worker"]
# Run with --network host, or add --listen REACHABLE_IP:7100, so that psctl can
# reach the Status endpoint this worker registers.
CMD ["--config", "/etc/downpour/cluster.yaml", "--index", "0"]
