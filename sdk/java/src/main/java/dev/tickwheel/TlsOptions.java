package dev.tickwheel;

import io.grpc.ChannelCredentials;
import io.grpc.TlsChannelCredentials;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * TLS for the channel to the server. Without a {@code TlsOptions} the client connects in
 * plaintext. Immutable; checked when built.
 */
public final class TlsOptions {
  private final byte[] rootCertificates;
  private final byte[] certificateChain;
  private final byte[] privateKey;
  private final String serverName;

  private TlsOptions(
      byte[] rootCertificates, byte[] certificateChain, byte[] privateKey, String serverName) {
    if ((certificateChain == null) != (privateKey == null)) {
      throw new IllegalArgumentException("TlsOptions: certificateChain and privateKey go together");
    }
    this.rootCertificates = rootCertificates == null ? null : rootCertificates.clone();
    this.certificateChain = certificateChain == null ? null : certificateChain.clone();
    this.privateKey = privateKey == null ? null : privateKey.clone();
    this.serverName = serverName;
  }

  /** TLS that trusts the system's root certificates. */
  public static TlsOptions systemRoots() {
    return new TlsOptions(null, null, null, null);
  }

  /**
   * TLS from PEM bytes: {@code rootCertificates} (the CA bundle that signs the server's
   * certificate; null uses the system roots), and for mutual TLS a client {@code
   * certificateChain} with its {@code privateKey} (both or neither).
   */
  public static TlsOptions fromPem(
      byte[] rootCertificates, byte[] certificateChain, byte[] privateKey) {
    return new TlsOptions(rootCertificates, certificateChain, privateKey, null);
  }

  /**
   * TLS from PEM files, as {@link #fromPem}; a null path leaves that part unset.
   *
   * @throws UncheckedIOException when a file cannot be read
   */
  public static TlsOptions fromFiles(Path caCert, Path clientCert, Path clientKey) {
    return fromPem(read(caCert), read(clientCert), read(clientKey));
  }

  /**
   * A copy that checks {@code serverName} against the server's certificate instead of the
   * address's host.
   */
  public TlsOptions withServerName(String serverName) {
    return new TlsOptions(rootCertificates, certificateChain, privateKey, serverName);
  }

  /** The host name checked against the server's certificate, when overridden. */
  public Optional<String> serverName() {
    return Optional.ofNullable(serverName);
  }

  /** The gRPC channel credentials these options describe. */
  public ChannelCredentials channelCredentials() {
    TlsChannelCredentials.Builder builder = TlsChannelCredentials.newBuilder();
    try {
      if (rootCertificates != null) {
        builder.trustManager(new ByteArrayInputStream(rootCertificates));
      }
      if (certificateChain != null) {
        builder.keyManager(
            new ByteArrayInputStream(certificateChain), new ByteArrayInputStream(privateKey));
      }
    } catch (IOException | IllegalArgumentException e) {
      throw new IllegalArgumentException("TlsOptions: unusable PEM: " + e.getMessage(), e);
    }
    return builder.build();
  }

  private static byte[] read(Path path) {
    if (path == null) {
      return null;
    }
    try {
      return Files.readAllBytes(path);
    } catch (IOException e) {
      throw new UncheckedIOException("TlsOptions: cannot read " + path, e);
    }
  }
}
