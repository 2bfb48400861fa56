/*
 * kafka_api — the names of the Kafka API keys (apache/kafka ApiKeys, Kafka
 * 4.x), for logs and metric labels in every role: the worker's codec
 * (kc_api_name, worker/kafka/codec.h) and the supervisor's /metrics
 * (supervisor/promfam.c), which must not include a worker header.
 * Header-only, so the pure codec library links nothing more.
 */
#ifndef FERRY_COMMON_KAFKA_API_H
#define FERRY_COMMON_KAFKA_API_H

#include <stdint.h>

#define KAFKA_API_KEY_MAX_KNOWN 94

/* "Produce", "Fetch", ...; "Unknown" outside 0..KAFKA_API_KEY_MAX_KNOWN. */
static inline const char *
kafka_api_name(int16_t api_key)
{
	static const char *const names[KAFKA_API_KEY_MAX_KNOWN + 1] = {
		"Produce", "Fetch", "ListOffsets", "Metadata", "LeaderAndIsr",
		"StopReplica", "UpdateMetadata", "ControlledShutdown", "OffsetCommit",
		"OffsetFetch", "FindCoordinator", "JoinGroup", "Heartbeat",
		"LeaveGroup", "SyncGroup", "DescribeGroups", "ListGroups",
		"SaslHandshake", "ApiVersions", "CreateTopics", "DeleteTopics",
		"DeleteRecords", "InitProducerId", "OffsetForLeaderEpoch",
		"AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "WriteTxnMarkers",
		"TxnOffsetCommit", "DescribeAcls", "CreateAcls", "DeleteAcls",
		"DescribeConfigs", "AlterConfigs", "AlterReplicaLogDirs",
		"DescribeLogDirs", "SaslAuthenticate", "CreatePartitions",
		"CreateDelegationToken", "RenewDelegationToken",
		"ExpireDelegationToken", "DescribeDelegationToken", "DeleteGroups",
		"ElectLeaders", "IncrementalAlterConfigs",
		"AlterPartitionReassignments", "ListPartitionReassignments",
		"OffsetDelete", "DescribeClientQuotas", "AlterClientQuotas",
		"DescribeUserScramCredentials", "AlterUserScramCredentials", "Vote",
		"BeginQuorumEpoch", "EndQuorumEpoch", "DescribeQuorum",
		"AlterPartition", "UpdateFeatures", "Envelope", "FetchSnapshot",
		"DescribeCluster", "DescribeProducers", "BrokerRegistration",
		"BrokerHeartbeat", "UnregisterBroker", "DescribeTransactions",
		"ListTransactions", "AllocateProducerIds", "ConsumerGroupHeartbeat",
		"ConsumerGroupDescribe", "ControllerRegistration",
		"GetTelemetrySubscriptions", "PushTelemetry", "AssignReplicasToDirs",
		"ListConfigResources", "DescribeTopicPartitions",
		"ShareGroupHeartbeat", "ShareGroupDescribe", "ShareFetch",
		"ShareAcknowledge", "AddRaftVoter", "RemoveRaftVoter",
		"UpdateRaftVoter", "InitializeShareGroupState", "ReadShareGroupState",
		"WriteShareGroupState", "DeleteShareGroupState",
		"ReadShareGroupStateSummary", "StreamsGroupHeartbeat",
		"StreamsGroupDescribe", "DescribeShareGroupOffsets",
		"AlterShareGroupOffsets", "DeleteShareGroupOffsets",
		"StreamsGroupTopologyDescriptionUpdate", "UnregisterController",
	};

	if (api_key < 0 || api_key > KAFKA_API_KEY_MAX_KNOWN)
		return "Unknown";
	return names[api_key];
}

#endif
