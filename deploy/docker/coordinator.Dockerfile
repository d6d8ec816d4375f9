# Downpour coordinator image. Build from the repository root:
#   docker build -f deploy/docker/coordinator.Dockerfile -t downpour/coordinator:0.1.0 .
# Run: mount the cluster file at /etc/downpour/cluster.yaml.
FROM debian:12 AS build
WORKDIR /src
COPY deploy/install_deps.sh deploy/install_deps.sh
RUN ./deploy/install_deps.sh
COPY . .
# The shared libraries the binaries need (less glibc's, which the runtime image
# has) go with them, so the runtime image needs no -dev packages.
RUN DOWNPOUR_NO_CUDA=1 bazel build //coordinator //tools:psctl \
 && mkdir -p /out/bin /out/lib \
 && cp bazel-bin/coordinator/coordinator bazel-bin/tools/psctl /out/bin/ \
 && ldd /out/bin/* | awk '/=> \// {print $3}' | sort -u \
    | grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' \
    | xargs -r cp -L -t /out/lib/

FROM debian:12-slim
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/downpour downpour \
 && mkdir -p /var/lib/downpour && chown downpour:downpour /var/lib/downpour
COPY --from=build /out/ /opt/downpour/
ENV LD_LIBRARY_PATH=/opt/downpour/lib
USER downpour
WORKDIR /var/lib/downpour
EXPOSE 7000
# --config: with security.tls on, the check speaks TLS like every client.
HEALTHCHECK --interval=10s --timeout=5s \
  CMD ["/opt/downpour/bin/psctl", "health", "--address", "127.0.0.1:7000", "--config", "/etc/downpour/cluster.yaml"]
ENTRYPOINT ["/opt/downpour/bin/coordinator"]
# Listening on 0.0.0.0 needs security.tls in cluster.yaml (or, on a network
# no one else reaches, security.insecure_network: true): docs/SECURITY.md.
CMD ["--config", "/etc/downpour/cluster.yaml", "--listen", "0.0.0.0:7000"]
