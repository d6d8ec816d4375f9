# Downpour parameter server image. Build from the repository root:
#   docker build -f deploy/docker/ps.Dockerfile -t downpour/ps:0.1.0 .
# Run one container per ps with --index N; mount the cluster file at
# /etc/downpour/cluster.yaml and a volume for checkpoint.dir.
FROM debian:12 AS build
WORKDIR /src
COPY deploy/install_deps.sh deploy/install_deps.sh
RUN ./deploy/install_deps.sh
COPY . .
RUN DOWNPOUR_NO_CUDA=1 bazel build //server:ps_server //tools:psctl \
 && mkdir -p /out/bin /out/lib \
 && cp bazel-bin/server/ps_server bazel-bin/tools/psctl /out/bin/ \
 && ldd /out/bin/* | awk '/=> \// {print $3}' | sort -u \
    | grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' \
    | xargs -r cp -L -t /out/lib/

FROM debian:12-slim
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/downpour downpour \
 && mkdir -p /var/lib/downpour/checkpoints && chown -R downpour:downpour /var/lib/downpour
COPY --from=build /out/ /opt/downpour/
ENV LD_LIBRARY_PATH=/opt/downpour/lib
USER downpour
WORKDIR /var/lib/downpour
VOLUME /var/lib/downpour/checkpoints
EXPOSE 7001
# --config: with security.tls on, the check speaks TLS like every client.
HEALTHCHECK --interval=10s --timeout=5s \
  CMD ["/opt/downpour/bin/psctl", "health", "--address", "127.0.0.1:7001", "--config", "/etc/downpour/cluster.yaml"]
ENTRYPOINT ["/opt/downpour/bin/ps_server"]
# Each ps registers the address it listens on, so it must be one the workers
# reach: run with --network host (the config's address), or add
# --listen REACHABLE_IP:7001.
CMD ["--config", "/etc/downpour/cluster.yaml", "--index", "0"]
