package dev.tickwheel;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.tickwheel.v1.SchedulerServiceGrpc;
import io.grpc.MethodDescriptor;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

class SchedulerRpcsTest {
  @Test
  void everySchedulerRpcHasARetryDecision() {
    Set<String> service =
        SchedulerServiceGrpc.getServiceDescriptor().getMethods().stream()
            .map(MethodDescriptor::getBareMethodName)
            .collect(Collectors.toCollection(TreeSet::new));
    Set<String> decided =
        SchedulerRpcs.ALL.stream()
            .map(SchedulerRpcs.Rpc::method)
            .collect(Collectors.toCollection(TreeSet::new));
    assertEquals(service, decided, "decide for each SchedulerService RPC whether it may be retried");
    assertEquals(SchedulerRpcs.ALL.size(), decided.size(), "one entry per RPC");
  }
}
