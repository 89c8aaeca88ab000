public enum TodoModelsVersion { public static let value = 1 }
